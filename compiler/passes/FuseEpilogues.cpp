// tfm-fuse-epilogues: GEMM epilogues and the residual join.
//
// 1. matmul(x, W^T) + bias_add (+ relu | gelu)   -> linear(x, W, b) {activation}
// 2. add(a, b) whose only user is layer_norm     -> add_layer_norm(a, b, gamma, beta)  (post-norm)
// 3. add(linear(...), r) otherwise               -> linear(..., residual = r)          (pre-norm)
// 4. log_softmax(matmul(x, W)) (only user)       -> matmul(x, W) {log_softmax}         (decode_step)
#include "mlir/IR/Builders.h"

#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "tfm/TfmDialect.h"

using namespace mlir;

namespace tfmc {
#define GEN_PASS_DEF_FUSEEPILOGUES
#include "passes/Passes.h.inc"

namespace {

bool dominatesInBlock(Value value, Operation *op) {
  Operation *def = value.getDefiningOp();
  if (!def) return value.getParentBlock() == op->getBlock();
  return def->getBlock() == op->getBlock() && def->isBeforeInBlock(op);
}

struct FuseEpiloguesPass : impl::FuseEpiloguesBase<FuseEpiloguesPass> {
  using FuseEpiloguesBase::FuseEpiloguesBase;

  void runOnOperation() override {
    SmallVector<tfm::MatmulOp> matmuls;
    getOperation().walk([&](tfm::MatmulOp op) { matmuls.push_back(op); });
    for (tfm::MatmulOp matmul : matmuls) fuseBiasAndActivation(matmul);

    SmallVector<tfm::AddOp> adds;
    getOperation().walk([&](tfm::AddOp op) { adds.push_back(op); });
    for (tfm::AddOp add : adds) fuseResidual(add);
  }

  void fuseBiasAndActivation(tfm::MatmulOp matmul) {
    if (matmul->hasOneUse())
      if (auto logSoftmax = dyn_cast<tfm::LogSoftmaxOp>(*matmul->getUsers().begin())) {
        matmul.setLogSoftmax(true);
        logSoftmax.getResult().replaceAllUsesWith(matmul.getResult());
        logSoftmax.erase();
        reportSite(report, matmul, "fuse-epilogues",
                   "log_softmax folded into the GEMM (rows normalised in place after the product)");
        return;
      }
    if (matmul.getLogSoftmax()) {  // already normalised: a bias after it is not a linear's bias
      reportSite(report, matmul, "fuse-epilogues", "matmul kept: it ends in log_softmax");
      return;
    }
    if (!matmul.getTransposeB()) {
      reportSite(report, matmul, "fuse-epilogues", "matmul kept: weight is not [out, in]");
      return;
    }
    tfm::BiasAddOp biasAdd =
        matmul->hasOneUse() ? dyn_cast<tfm::BiasAddOp>(*matmul->getUsers().begin()) : nullptr;
    if (!biasAdd) {
      reportSite(report, matmul, "fuse-epilogues",
                 "matmul kept: no bias add follows (e.g. the bias-free output projection)");
      return;
    }
    Operation *last = biasAdd;
    StringRef activation = "none";
    if (biasAdd->hasOneUse()) {
      Operation *user = *biasAdd->getUsers().begin();
      if (isa<tfm::ReluOp>(user)) activation = "relu";
      if (isa<tfm::GeluOp>(user)) activation = "gelu";
      if (activation != "none") last = user;
    }
    OpBuilder b(last);
    auto linear = b.create<tfm::LinearOp>(
        matmul.getLoc(), last->getResult(0).getType(), matmul.getLhs(), matmul.getRhs(),
        biasAdd.getBias(), /*residual=*/Value(), b.getStringAttr(activation),
        matmul.getWeightLayoutAttr());
    last->getResult(0).replaceAllUsesWith(linear.getResult());
    if (last != biasAdd) last->erase();
    biasAdd.erase();
    matmul.erase();
    reportSite(report, linear, "fuse-epilogues",
               activation == "none" ? "bias folded into the GEMM"
                                    : ("bias + " + activation + " folded into the GEMM").str());
  }

  void fuseResidual(tfm::AddOp add) {
    if (add->hasOneUse())
      if (auto norm = dyn_cast<tfm::LayerNormOp>(*add->getUsers().begin())) {
        OpBuilder b(norm);
        auto fused = b.create<tfm::AddLayerNormOp>(norm.getLoc(), norm.getType(), add.getLhs(),
                                                   add.getRhs(), norm.getGamma(), norm.getBeta(),
                                                   norm.getEpsilonAttr());
        norm.getResult().replaceAllUsesWith(fused.getResult());
        norm.erase();
        add.erase();
        reportSite(report, fused, "fuse-epilogues",
                   "residual add + LayerNorm fused into one pass (post-norm)");
        return;
      }
    // Fold into the GEMM whose result is consumed only here; the other operand must already be
    // computed when the GEMM runs.
    for (auto [gemmSide, residual] :
         {std::pair<Value, Value>{add.getRhs(), add.getLhs()}, {add.getLhs(), add.getRhs()}}) {
      auto linear = gemmSide.getDefiningOp<tfm::LinearOp>();
      if (!linear || linear.getResidual() || !linear->hasOneUse() ||
          !dominatesInBlock(residual, linear))
        continue;
      OpBuilder b(add);
      auto fused = b.create<tfm::LinearOp>(linear.getLoc(), add.getType(), linear.getInput(),
                                           linear.getWeight(), linear.getBias(), residual,
                                           linear.getActivationAttr(),
                                           linear.getWeightLayoutAttr());
      add.getResult().replaceAllUsesWith(fused.getResult());
      add.erase();
      linear.erase();
      reportSite(report, fused, "fuse-epilogues",
                 "residual add folded into the GEMM as a post-op (pre-norm)");
      return;
    }
    reportSite(report, add, "fuse-epilogues",
               "add kept: neither operand is a GEMM result used only here, and no LayerNorm "
               "is its only user");
  }
};

}  // namespace
}  // namespace tfmc
