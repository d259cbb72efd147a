// tfm-remove-inference-dropout: dropout is the identity in inference entry functions.
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "tfm/TfmDialect.h"

namespace tfmc {
#define GEN_PASS_DEF_REMOVEINFERENCEDROPOUT
#include "passes/Passes.h.inc"

namespace {
struct RemoveInferenceDropoutPass
    : impl::RemoveInferenceDropoutBase<RemoveInferenceDropoutPass> {
  using RemoveInferenceDropoutBase::RemoveInferenceDropoutBase;

  void runOnOperation() override {
    mlir::func::FuncOp fn = getOperation();
    auto mode = fn->getAttrOfType<mlir::StringAttr>("tfm.mode");
    if (!mode || mode.getValue() != "inference") return;
    int removed = 0;
    fn.walk([&](tfm::DropoutOp op) {
      op.getResult().replaceAllUsesWith(op.getInput());
      op.erase();
      ++removed;
    });
    if (report && removed)
      fn.emitRemark() << "remove-inference-dropout: " << fn.getSymName() << ": removed "
                      << removed << " dropout ops (inference entry)";
  }
};
}  // namespace
}  // namespace tfmc
