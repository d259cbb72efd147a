// tfm-quantize-int8: in inference functions, GEMM sites with a packed constant weight run with int8
// operands and int32 accumulation: weight_layout "packed" becomes "packed_int8" (the runtime keeps
// the f32 weight as master and quantizes a copy per weights version, per output column). Functions
// that compute gradients (train_step, and `gradients`, which the importer marks "inference"
// because it applies no dropout) stay f32, as do GEMMs between two run-time values and everything
// that is not a GEMM.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "tfm/TfmDialect.h"
#include "tfm/rules/OpRules.h"

using namespace mlir;

namespace tfmc {
#define GEN_PASS_DEF_QUANTIZEINT8
#include "passes/Passes.h.inc"

namespace {

struct QuantizeInt8Pass : impl::QuantizeInt8Base<QuantizeInt8Pass> {
  using QuantizeInt8Base::QuantizeInt8Base;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    auto mode = fn->getAttrOfType<StringAttr>("tfm.mode");
    // The runtime's rule for a training entry (tfm::rules::isTrainingOp, shared with it).
    bool gradients = false;
    fn.walk([&](Operation *op) {
      const StringRef name = op->getName().getStringRef();
      gradients = gradients || tfm::rules::isTrainingOp(std::string_view(name.data(), name.size()));
    });
    const bool inference = mode && mode.getValue() == "inference" && !gradients;
    Builder b(&getContext());
    auto int8 = b.getStringAttr("packed_int8");
    fn.walk([&](Operation *op) {
      if (!isa<tfm::MatmulOp, tfm::LinearOp>(op)) return;
      if (!inference) {
        reportSite(report, op, "quantize-int8", "f32: a function that computes gradients (training or `gradients`)");
        return;
      }
      auto layout = op->getAttrOfType<StringAttr>("weight_layout");
      if (!layout || layout.getValue() != "packed") {
        reportSite(report, op, "quantize-int8", "f32: the weight is not packed (not a constant)");
        return;
      }
      op->setAttr("weight_layout", int8);
      reportSite(report, op, "quantize-int8", "int8 operands, int32 accumulation (weight per column, input per row)");
    });
  }
};

}  // namespace
}  // namespace tfmc
