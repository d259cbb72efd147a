// tfm-autodiff: reverse-mode differentiation of a loss function over the primitive tfm ops.
//
// Forward ops stay as they are; backward ops are appended before the return in reverse program
// order. Only "active" values (those that depend on a tfm.param) get gradients, so nothing is
// computed for masks, ids or position tables. Each backward op carries its forward op's location,
// so diagnostics and the fusion report still point at the spec line that produced the site.
#include "llvm/ADT/MapVector.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "passes/Passes.h"
#include "tfm/TfmDialect.h"

namespace tfmc {
#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

class Differentiator {
public:
  Differentiator(func::FuncOp fn) : fn_(fn), b_(fn.getContext()) {}

  LogicalResult run() {
    Block &body = fn_.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (ret.getNumOperands() != 1)
      return fn_.emitError() << "tfm-autodiff: '" << fn_.getSymName()
                             << "' must return exactly the loss, got " << ret.getNumOperands() << " results";
    Value loss = ret.getOperand(0);
    auto xent = loss.getDefiningOp<tfm::LabelSmoothedXentOp>();
    if (!xent)
      return fn_.emitError() << "tfm-autodiff: the loss of '" << fn_.getSymName()
                             << "' must be the result of tfm.label_smoothed_xent";

    // Active values: those depending on a parameter.
    for (Operation &op : body.without_terminator()) {
      bool active = isa<tfm::ParamOp>(op);
      for (Value v : op.getOperands()) active |= active_.contains(v);
      if (active)
        for (Value r : op.getResults()) active_.insert(r);
    }

    b_.setInsertionPoint(ret);
    // Seed: d loss / d logits (the loss is the result, so its own gradient is 1).
    Value logits = xent.getLogits();
    if (active_.contains(logits))
      accumulate(logits, b_.create<tfm::LabelSmoothedXentGradOp>(xent.getLoc(), logits.getType(), logits,
                                                                  xent.getTargets(), xent.getSmoothingAttr(),
                                                                  xent.getPadIdAttr()));

    SmallVector<Operation *> forward;
    for (Operation &op : body.without_terminator()) forward.push_back(&op);
    for (Operation *op : llvm::reverse(forward)) {
      if (op == xent.getOperation() || op->getNumResults() != 1) continue;
      Value dy = grads_.lookup(op->getResult(0));
      if (!dy) continue;  // does not reach the loss, or is not active
      b_.setInsertionPoint(ret);
      if (failed(backward(op, dy)) || failed(typeError_)) return failure();
    }

    // One gradient per parameter name, in the order of the tfm.param ops (the importer creates
    // each where it is first used).
    llvm::MapVector<StringRef, Value> paramGrads;
    llvm::MapVector<StringRef, Type> paramTypes;
    for (Operation *op : forward)
      if (auto param = dyn_cast<tfm::ParamOp>(op)) {
        paramTypes.insert({param.getName(), param.getType()});
        Value g = grads_.lookup(param.getResult());
        if (!g) continue;
        auto [it, fresh] = paramGrads.insert({param.getName(), g});
        if (!fresh) {
          b_.setInsertionPoint(ret);
          it->second = b_.create<tfm::AddOp>(param.getLoc(), g.getType(), it->second, g);
        }
      }
    for (auto &[name, type] : paramTypes)
      if (!paramGrads.count(name))
        return fn_.emitError() << "tfm-autodiff: parameter '" << name << "' does not affect the loss";

    SmallVector<Value> results{loss};
    SmallVector<Type> types{loss.getType()};
    for (auto &[name, g] : paramGrads) {
      results.push_back(g);
      types.push_back(g.getType());
    }
    b_.setInsertionPoint(ret);
    b_.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    fn_.setFunctionType(b_.getFunctionType(fn_.getArgumentTypes(), types));
    SmallVector<DictionaryAttr> resultAttrs;
    resultAttrs.push_back(b_.getDictionaryAttr(b_.getNamedAttr("tfm.name", b_.getStringAttr("loss"))));
    for (auto &[name, g] : paramGrads)
      resultAttrs.push_back(
          b_.getDictionaryAttr(b_.getNamedAttr("tfm.name", b_.getStringAttr(("grad:" + name).str()))));
    fn_.setAllResultAttrs(resultAttrs);
    fn_->removeAttr("tfm.differentiate");
    return success();
  }

private:
  void accumulate(Value v, Value g) {
    if (!active_.contains(v)) return;
    // A gradient has its value's type. Pass-through rules (bias_add, mask, add_positions) reuse
    // dy, whose type is the op's result type: the two differ only if the verifier let a result be
    // more refined than its operand (static vs `?`), which the importer never produces.
    if (g.getType() != v.getType()) {
      typeError_ = emitError(g.getLoc()) << "tfm-autodiff: gradient type " << g.getType()
                                         << " differs from its value's type " << v.getType()
                                         << " (operand and result shapes must be equally refined)";
      return;
    }
    Value &slot = grads_[v];
    slot = slot ? b_.create<tfm::AddOp>(g.getLoc(), g.getType(), slot, g).getResult() : g;
  }
  bool needs(Value v) const { return active_.contains(v); }

  LogicalResult backward(Operation *op, Value dy) {
    Location loc = op->getLoc();
    if (auto mm = dyn_cast<tfm::MatmulOp>(op)) {
      if (mm.getLogSoftmax())  // inference only (decode_step); fused after autodiff
        return op->emitError("tfm-autodiff: no gradient for tfm.matmul {log_softmax}");
      Value a = mm.getLhs(), w = mm.getRhs();
      // y = a w^T (w [N, K]) or y = a w (w [K, N]).
      if (needs(a)) accumulate(a, b_.create<tfm::MatmulOp>(loc, dy, w, b_.getBoolAttr(!mm.getTransposeB())));
      if (needs(w)) {
        Value gw = mm.getTransposeB() ? b_.create<tfm::WeightGradOp>(loc, dy, a).getResult()
                                      : b_.create<tfm::WeightGradOp>(loc, a, dy).getResult();
        accumulate(w, gw);
      }
      return success();
    }
    if (auto bmm = dyn_cast<tfm::BatchMatmulOp>(op)) {
      if (bmm.getTransposeA())
        return op->emitError("tfm-autodiff: batch_matmul with transpose_a is not differentiated");
      Value a = bmm.getLhs(), bv = bmm.getRhs();
      const bool tb = bmm.getTransposeB();
      // C = A B:   dA = dC B^T, dB = A^T dC.   C = A B^T: dA = dC B, dB = dC^T A.
      if (needs(a))
        accumulate(a, b_.create<tfm::BatchMatmulOp>(loc, dy, bv, b_.getBoolAttr(!tb), b_.getBoolAttr(false)));
      if (needs(bv)) {
        Value gb = tb ? b_.create<tfm::BatchMatmulOp>(loc, dy, a, b_.getBoolAttr(false), b_.getBoolAttr(true))
                      : b_.create<tfm::BatchMatmulOp>(loc, a, dy, b_.getBoolAttr(false), b_.getBoolAttr(true));
        accumulate(bv, gb);
      }
      return success();
    }
    if (auto bias = dyn_cast<tfm::BiasAddOp>(op)) {
      accumulate(bias.getInput(), dy);
      if (needs(bias.getBias()))
        accumulate(bias.getBias(), b_.create<tfm::BiasGradOp>(loc, dy));
      return success();
    }
    if (auto add = dyn_cast<tfm::AddOp>(op)) {
      accumulate(add.getLhs(), dy);
      accumulate(add.getRhs(), dy);
      return success();
    }
    if (auto scale = dyn_cast<tfm::ScaleOp>(op)) {
      accumulate(scale.getInput(), b_.create<tfm::ScaleOp>(loc, dy, scale.getFactorAttr()));
      return success();
    }
    if (auto relu = dyn_cast<tfm::ReluOp>(op)) {
      // The mask from the output (y > 0 exactly where x > 0): the pre-activation then has no
      // use but the relu, so tfm-fuse-epilogues folds bias + relu into the GEMM in training too.
      accumulate(relu.getInput(), b_.create<tfm::ReluGradOp>(loc, relu.getResult(), dy));
      return success();
    }
    if (auto gelu = dyn_cast<tfm::GeluOp>(op)) {
      accumulate(gelu.getInput(), b_.create<tfm::GeluGradOp>(loc, gelu.getInput(), dy));
      return success();
    }
    if (auto softmax = dyn_cast<tfm::SoftmaxOp>(op)) {
      accumulate(softmax.getInput(), b_.create<tfm::SoftmaxGradOp>(loc, softmax.getResult(), dy));
      return success();
    }
    if (auto mask = dyn_cast<tfm::MaskOp>(op)) {
      // Masked scores are -inf; whatever consumes them (softmax) passes no gradient there.
      accumulate(mask.getScores(), dy);
      return success();
    }
    if (auto ln = dyn_cast<tfm::LayerNormOp>(op)) {
      Value x = ln.getInput();
      auto eps = ln.getEpsilonAttr();
      if (needs(x)) accumulate(x, b_.create<tfm::LayerNormGradOp>(loc, x, ln.getGamma(), dy, eps));
      if (needs(ln.getGamma()))
        accumulate(ln.getGamma(), b_.create<tfm::LayerNormGammaGradOp>(loc, x, dy, eps));
      if (needs(ln.getBeta())) accumulate(ln.getBeta(), b_.create<tfm::BiasGradOp>(loc, dy));
      return success();
    }
    if (auto split = dyn_cast<tfm::SplitHeadsOp>(op)) {
      accumulate(split.getInput(), b_.create<tfm::MergeHeadsOp>(loc, dy));
      return success();
    }
    if (auto merge = dyn_cast<tfm::MergeHeadsOp>(op)) {
      auto inType = cast<RankedTensorType>(merge.getInput().getType());
      accumulate(merge.getInput(),
                 b_.create<tfm::SplitHeadsOp>(loc, dy, b_.getI64IntegerAttr(inType.getDimSize(1))));
      return success();
    }
    if (auto emb = dyn_cast<tfm::EmbeddingOp>(op)) {
      auto tableType = cast<RankedTensorType>(emb.getTable().getType());
      accumulate(emb.getTable(), b_.create<tfm::EmbeddingGradOp>(loc, emb.getIds(), dy,
                                                                 b_.getI64IntegerAttr(tableType.getDimSize(0))));
      return success();
    }
    if (auto pos = dyn_cast<tfm::AddPositionsOp>(op)) {
      accumulate(pos.getInput(), dy);
      if (needs(pos.getTable())) {
        auto tableType = cast<RankedTensorType>(pos.getTable().getType());
        accumulate(pos.getTable(), b_.create<tfm::PositionsGradOp>(loc, dy,
                                                                   b_.getI64IntegerAttr(tableType.getDimSize(0))));
      }
      return success();
    }
    if (auto drop = dyn_cast<tfm::DropoutOp>(op)) {
      // The mask is a function of (seed, site, step, index): the same op masks the gradient.
      // Without a step the op is the identity.
      Value dx = drop.getStep() ? b_.create<tfm::DropoutOp>(loc, dy, drop.getStep(), drop.getRateAttr(),
                                                            drop.getSeedAttr(), drop.getSiteAttr())
                                      .getResult()
                                : dy;
      accumulate(drop.getInput(), dx);
      return success();
    }
    if (isa<tfm::ParamOp>(op)) return success();  // collected by the caller
    return op->emitError() << "tfm-autodiff: no backward rule for " << op->getName();
  }

  func::FuncOp fn_;
  OpBuilder b_;
  llvm::DenseSet<Value> active_;
  llvm::DenseMap<Value, Value> grads_;
  LogicalResult typeError_ = success();
};

struct AutodiffPass : impl::AutodiffBase<AutodiffPass> {
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (fn->hasAttr("tfm.differentiate") && failed(Differentiator(fn).run())) return signalPassFailure();
  }
};

}  // namespace
}  // namespace tfmc
