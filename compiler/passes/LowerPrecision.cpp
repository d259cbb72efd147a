// tfm-lower-precision: GEMM sites run with bf16 operands and f32 accumulation: weight_layout
// "packed" becomes "packed_bf16" (the runtime keeps the f32 weight as master and packs a bf16 copy
// per weights version), and tfm.weight_grad and tfm.fused_attention get precision "bf16". GEMMs
// between two run-time values (the unfused attention chain), LayerNorm, softmax, the loss and the
// optimizer stay f32.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "tfm/TfmDialect.h"

using namespace mlir;

namespace tfmc {
#define GEN_PASS_DEF_LOWERPRECISION
#include "passes/Passes.h.inc"

namespace {

struct LowerPrecisionPass : impl::LowerPrecisionBase<LowerPrecisionPass> {
  using LowerPrecisionBase::LowerPrecisionBase;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    Builder b(&getContext());
    auto bf16 = b.getStringAttr("packed_bf16");
    fn.walk([&](Operation *op) {
      if (auto grad = dyn_cast<tfm::WeightGradOp>(op)) {
        grad.setPrecision("bf16");
        reportSite(report, op, "lower-precision", "bf16 operands, f32 accumulation (weight gradient)");
        return;
      }
      if (auto attention = dyn_cast<tfm::FusedAttentionOp>(op)) {
        attention.setPrecision("bf16");
        reportSite(report, op, "lower-precision", "bf16 Q.K and P.V operands, f32 softmax and accumulation (attention)");
        return;
      }
      if (!isa<tfm::MatmulOp, tfm::LinearOp>(op)) return;
      auto layout = op->getAttrOfType<StringAttr>("weight_layout");
      if (!layout || layout.getValue() != "packed") {
        reportSite(report, op, "lower-precision", "f32: the weight is not packed (not a constant)");
        return;
      }
      op->setAttr("weight_layout", bf16);
      reportSite(report, op, "lower-precision", "bf16 operands, f32 accumulation (weight packed as bf16)");
    });
  }
};

}  // namespace
}  // namespace tfmc
