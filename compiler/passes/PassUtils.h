// Helpers shared by the tfm passes: fusion-report remarks and small IR queries.
#pragma once

#include <string>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"

namespace tfmc {

// The scope name the importer attached to an op ("encoder.layers.0.self_attn"), or "".
std::string siteName(mlir::Operation *op);

// Emits a fusion-report remark "<pass>: <site>: <message>" at the op's spec location.
void reportSite(bool enabled, mlir::Operation *op, llvm::StringRef pass, llvm::StringRef message);

// True if the value is a tfm.param, or a tfm.concat of tfm.params (a weight the runtime can
// prepare once when weights are set).
bool isWeight(mlir::Value value);

// One Adam step on each (parameter, gradient) pair at the builder's insertion point: the
// learning rate of `step` (tfm.lr_schedule), then tfm.adam_update with the moments as session
// state "adam.m/<param>", "adam.v/<param>" (shared by every entry that trains). `hyper` holds
// beta1, beta2, epsilon, lr_scale (f64) and d_model, warmup_steps (i64), and optionally
// clip_norm (f64; > 0: every gradient scaled by tfm.clip_scale of their global norm first) and
// weight_decay (f64 in [0, 1): decoupled, tfm.adam_update's attribute);
// `fail` reports what is missing. Returns the sum of the squared gradients, before clipping (for
// the global gradient norm).
struct ParamGradient {
  mlir::Value param;  // a tfm.param result
  mlir::Value grad;
};
mlir::FailureOr<mlir::Value> buildAdamUpdates(mlir::OpBuilder &b, mlir::Location loc, mlir::DictionaryAttr hyper,
                                              mlir::Value step, llvm::ArrayRef<ParamGradient> updates,
                                              llvm::function_ref<mlir::InFlightDiagnostic()> fail);

}  // namespace tfmc
