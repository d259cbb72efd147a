// Helpers shared by the tfm passes: fusion-report remarks and small IR queries.
#pragma once

#include <string>

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

}  // namespace tfmc
