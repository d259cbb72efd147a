// Imports a model spec into tfm IR: a module with entry functions built from primitive tfm ops.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include "spec/ModelSpec.h"

namespace tfmc {

struct ImportOptions {
  // Also build `@gradients(src, tgt_in, tgt_out) -> (loss)` marked `tfm.differentiate`
  // (tfm-autodiff turns it into loss + one gradient per parameter).
  bool gradients = false;
  // Also build `@train_step(src, tgt_in, tgt_out, step) -> (loss)`, marked for tfm-autodiff and
  // tfm-apply-adam (which make it update the weights in place and return loss, grad_sq_norm).
  bool trainStep = false;
  // Also build `@accumulate_gradients(src, tgt_in, tgt_out, step, weight, reset) -> (loss)` for
  // gradient accumulation (tfm-accumulate-gradients adds `@apply_update(step)`).
  bool accumulate = false;
  // Also build `@encode(src) -> memory` and `@decode(src, memory, tgt_in) -> last logits` for
  // translation (greedy / beam search in the runtime).
  bool translate = false;
  // With `translate`: `decode_step` also returns `alignment` [R, 1, S], the last decoder layer's
  // cross-attention weights averaged over heads (tfm.attention_weights; word alignment).
  bool alignment = false;
  int alignmentLayer = -1;  // the decoder layer whose weights those are (-1: the last)
};

// Builds `func.func @forward(%src, %tgt_in, %tgt_out) -> (logits, loss)` for inference-mode
// forward + loss (and `@gradients`, see ImportOptions). Op locations are NameLoc("<param
// scope>") wrapping the spec file location.
mlir::OwningOpRef<mlir::ModuleOp> importModelSpec(const ModelSpec &spec, mlir::MLIRContext &ctx,
                                                  const ImportOptions &options = {});

}  // namespace tfmc
