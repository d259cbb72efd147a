// Shape contracts of the gradient ops (tfm-autodiff) and the optimizer ops (tfm-apply-adam).
#include "tfm/TfmDialect.h"

#include "VerifierUtils.h"

using namespace mlir;
using namespace tfm;
using namespace tfm::verify;

namespace {

// dy [..., N] against x [..., K]: the same leading dimensions.
LogicalResult expectSameLeading(Operation *op, Value dy, Value x, StringRef what) {
  auto a = rankedType(dy).getShape(), b = rankedType(x).getShape();
  if (a.size() != b.size())
    return op->emitOpError() << what << " must have the rank of dy (" << a.size() << "), got rank " << b.size();
  for (size_t i = 0; i + 1 < a.size(); ++i)
    if (failed(expectDim(op, b[i], a[i], (what + " dimension " + std::to_string(i)).str()))) return failure();
  return success();
}

// An operand that must have the shape of the forward input x.
LogicalResult expectLikeInput(Operation *op, Value v, ArrayRef<int64_t> x, StringRef what) {
  auto shape = rankedType(v).getShape();
  if (shape.size() != x.size())
    return op->emitOpError() << what << " must have the input's rank " << x.size() << ", got rank " << shape.size();
  for (size_t i = 0; i < x.size(); ++i)
    if (failed(expectDim(op, shape[i], x[i], (what + " dimension " + std::to_string(i)).str()))) return failure();
  return success();
}

}  // namespace

LogicalResult WeightGradOp::verify() {
  auto dy = rankedType(getDy()).getShape();
  if (dy.size() < 2) return emitOpError() << "dy must have rank >= 2, got rank " << dy.size();
  if (failed(expectSameLeading(*this, getDy(), getInput(), "input"))) return failure();
  return expectShape(*this, getResult(), {dy.back(), rankedType(getInput()).getShape().back()});
}

LogicalResult BiasGradOp::verify() {
  auto dy = rankedType(getDy()).getShape();
  if (dy.empty()) return emitOpError("dy must have rank >= 1");
  return expectShape(*this, getResult(), {dy.back()});
}

LogicalResult LayerNormGradOp::verify() {
  auto x = rankedType(getInput()).getShape();
  if (x.empty()) return emitOpError("input must have rank >= 1");
  if (failed(expectRank(*this, getGamma(), 1, "gamma")) ||
      failed(expectDim(*this, rankedType(getGamma()).getDimSize(0), x.back(), "gamma length")) ||
      failed(expectLikeInput(*this, getDy(), x, "dy")))
    return failure();
  if (getEpsilon().convertToDouble() <= 0.0) return emitOpError("epsilon must be positive");
  return expectShape(*this, getResult(), x);
}

LogicalResult LayerNormGammaGradOp::verify() {
  auto x = rankedType(getInput()).getShape();
  if (x.empty()) return emitOpError("input must have rank >= 1");
  if (failed(expectLikeInput(*this, getDy(), x, "dy"))) return failure();
  if (getEpsilon().convertToDouble() <= 0.0) return emitOpError("epsilon must be positive");
  return expectShape(*this, getResult(), {x.back()});
}

LogicalResult EmbeddingGradOp::verify() {
  if (failed(expectRank(*this, getIds(), 2, "ids")) || failed(expectRank(*this, getDy(), 3, "dy")) ||
      failed(expectRank(*this, getResult(), 2, "result")))
    return failure();
  auto ids = rankedType(getIds()).getShape(), dy = rankedType(getDy()).getShape();
  if (failed(expectDim(*this, dy[0], ids[0], "dy batch dimension")) ||
      failed(expectDim(*this, dy[1], ids[1], "dy length")))
    return failure();
  if (getNumRows() <= 0) return emitOpError() << "num_rows must be positive, got " << getNumRows();
  return expectShape(*this, getResult(), {getNumRows(), dy[2]});
}

LogicalResult PositionsGradOp::verify() {
  if (failed(expectRank(*this, getDy(), 3, "dy")) || failed(expectRank(*this, getResult(), 2, "result")))
    return failure();
  if (getNumRows() <= 0) return emitOpError() << "num_rows must be positive, got " << getNumRows();
  auto dy = rankedType(getDy()).getShape();
  if (!ShapedType::isDynamic(dy[1]) && dy[1] > getNumRows())
    return emitOpError() << "sequence length " << dy[1] << " exceeds the position table (" << getNumRows()
                         << " rows)";
  return expectShape(*this, getResult(), {getNumRows(), dy[2]});
}

LogicalResult LabelSmoothedXentGradOp::verify() {
  if (failed(expectRank(*this, getLogits(), 3, "logits")) || failed(expectRank(*this, getTargets(), 2, "targets")))
    return failure();
  auto logits = rankedType(getLogits()).getShape(), targets = rankedType(getTargets()).getShape();
  if (failed(expectDim(*this, targets[0], logits[0], "targets batch dimension")) ||
      failed(expectDim(*this, targets[1], logits[1], "targets length")) ||
      failed(expectRate(*this, getSmoothing().convertToDouble(), "smoothing")))
    return failure();
  return expectShape(*this, getResult(), logits);
}

LogicalResult LrScheduleOp::verify() {
  if (failed(expectRank(*this, getStep(), 0, "step"))) return failure();
  if (getLrScale().convertToDouble() <= 0.0) return emitOpError("lr_scale must be positive");
  if (getDModel() <= 0 || getWarmupSteps() <= 0) return emitOpError("d_model and warmup_steps must be positive");
  return expectShape(*this, getResult(), {});
}

LogicalResult AdamUpdateOp::verify() {
  if (!getParam().getDefiningOp<ParamOp>()) return emitOpError("param must be the result of tfm.param");
  auto param = rankedType(getParam()).getShape();
  if (failed(expectLikeInput(*this, getGrad(), param, "grad")) || failed(expectRank(*this, getLr(), 0, "lr")) ||
      failed(expectRank(*this, getStep(), 0, "step")))
    return failure();
  for (auto [moment, name] : {std::pair<Value, const char *>{getM(), "m"}, {getV(), "v"}}) {
    if (!moment.getDefiningOp<StateOp>()) return emitOpError() << name << " must be a tfm.state (the optimizer state)";
    if (moment.getType() != getParam().getType())
      return emitOpError() << name << " must have the parameter's type " << getParam().getType() << ", got "
                           << moment.getType();
  }
  for (auto [name, beta] : {std::pair<const char *, double>{"beta1", getBeta1().convertToDouble()},
                            {"beta2", getBeta2().convertToDouble()}})
    if (failed(expectRate(*this, beta, name))) return failure();
  if (getEpsilon().convertToDouble() <= 0.0) return emitOpError("epsilon must be positive");
  return expectShape(*this, getResult(), {});
}
