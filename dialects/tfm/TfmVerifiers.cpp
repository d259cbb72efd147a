// Shape contracts of the tfm ops. Dynamic dimensions (`?`) are compatible with anything; the
// runtime re-checks them against the bound sizes.
#include "tfm/TfmDialect.h"

#include "mlir/IR/BuiltinTypes.h"

#include "VerifierUtils.h"

using namespace mlir;
using namespace tfm;
using namespace tfm::verify;


LogicalResult ParamOp::verify() {
  if (getName().empty()) return emitOpError("parameter name must not be empty");
  if (!getType().hasStaticShape()) return emitOpError("parameter shape must be static");
  return success();
}

LogicalResult PositionTableOp::verify() {
  if (int64_t(getMaxLen()) <= 0 || int64_t(getDim()) <= 0)
    return emitOpError("max_len and dim must be positive");
  if (getDim() % 2 != 0) return emitOpError("sinusoidal tables need an even dim, got ") << getDim();
  return expectShape(*this, getResult(), {getMaxLen(), getDim()});
}

LogicalResult EmbeddingOp::verify() {
  if (failed(expectRank(*this, getTable(), 2, "table")) ||
      failed(expectRank(*this, getIds(), 2, "ids")))
    return failure();
  auto table = rankedType(getTable()).getShape();
  auto ids = rankedType(getIds()).getShape();
  return expectShape(*this, getResult(), {ids[0], ids[1], table[1]});
}

LogicalResult AddPositionsOp::verify() {
  if (failed(expectRank(*this, getInput(), 3, "input")) ||
      failed(expectRank(*this, getTable(), 2, "table")))
    return failure();
  auto x = rankedType(getInput()).getShape();
  auto table = rankedType(getTable()).getShape();
  if (failed(expectDim(*this, table[1], x[2], "table width")))
    return failure();
  if (!ShapedType::isDynamic(x[1]) && !ShapedType::isDynamic(table[0]) && x[1] > table[0])
    return emitOpError() << "sequence length " << x[1] << " exceeds the position table ("
                         << table[0] << " rows)";
  return expectShape(*this, getResult(), x);
}

LogicalResult DropoutOp::verify() {
  if (failed(expectRate(*this, getRate().convertToDouble(), "rate"))) return failure();
  if (getStep()) {
    if (failed(expectRank(*this, getStep(), 0, "step"))) return failure();
    if (getSite().empty()) return emitOpError("a training dropout (with a step) needs a site name");
  }
  return success();
}

LogicalResult BiasAddOp::verify() {
  if (failed(expectRank(*this, getBias(), 1, "bias"))) return failure();
  auto x = rankedType(getInput()).getShape();
  if (x.empty()) return emitOpError("input must have rank >= 1");
  if (failed(expectDim(*this, rankedType(getBias()).getDimSize(0), x.back(), "bias length")))
    return failure();
  return expectShape(*this, getResult(), x);
}

LogicalResult LayerNormOp::verify() {
  auto x = rankedType(getInput()).getShape();
  if (x.empty()) return emitOpError("input must have rank >= 1");
  if (failed(expectRank(*this, getGamma(), 1, "gamma")) ||
      failed(expectRank(*this, getBeta(), 1, "beta")) ||
      failed(expectDim(*this, rankedType(getGamma()).getDimSize(0), x.back(), "gamma length")) ||
      failed(expectDim(*this, rankedType(getBeta()).getDimSize(0), x.back(), "beta length")))
    return failure();
  if (getEpsilon().convertToDouble() <= 0.0) return emitOpError("epsilon must be positive");
  return expectShape(*this, getResult(), x);
}

LogicalResult MatmulOp::verify() {
  auto a = rankedType(getLhs()).getShape();
  if (a.size() < 2) return emitOpError() << "lhs must have rank >= 2, got rank " << a.size();
  if (failed(expectRank(*this, getRhs(), 2, "rhs"))) return failure();
  auto b = rankedType(getRhs()).getShape();
  int64_t k = getTransposeB() ? b[1] : b[0];
  int64_t n = getTransposeB() ? b[0] : b[1];
  if (failed(expectDim(*this, k, a.back(), "rhs contraction dimension")))
    return failure();
  if (getWeightLayout() != "plain" && getWeightLayout() != "packed")
    return emitOpError() << "weight_layout must be 'plain' or 'packed', got '" << getWeightLayout()
                         << "'";
  SmallVector<int64_t> expected(a.begin(), a.end());
  expected.back() = n;
  return expectShape(*this, getResult(), expected);
}

LogicalResult BatchMatmulOp::verify() {
  if (failed(expectRank(*this, getLhs(), 4, "lhs")) ||
      failed(expectRank(*this, getRhs(), 4, "rhs")))
    return failure();
  auto a = rankedType(getLhs()).getShape();
  auto b = rankedType(getRhs()).getShape();
  if (failed(expectDim(*this, b[0], a[0], "rhs batch dimension")) ||
      failed(expectDim(*this, b[1], a[1], "rhs head dimension")))
    return failure();
  const int64_t m = getTransposeA() ? a[3] : a[2], ka = getTransposeA() ? a[2] : a[3];
  int64_t k = getTransposeB() ? b[3] : b[2];
  int64_t n = getTransposeB() ? b[2] : b[3];
  if (failed(expectDim(*this, k, ka, "rhs contraction dimension"))) return failure();
  return expectShape(*this, getResult(), {a[0], a[1], m, n});
}

LogicalResult SplitHeadsOp::verify() {
  if (failed(expectRank(*this, getInput(), 3, "input"))) return failure();
  auto x = rankedType(getInput()).getShape();
  int64_t heads = getHeads();
  if (heads <= 0) return emitOpError() << "heads must be positive, got " << heads;
  if (ShapedType::isDynamic(x[2]))
    return emitOpError("model dimension must be static");
  if (x[2] % heads != 0)
    return emitOpError() << "heads (" << heads << ") must divide the model dimension (" << x[2]
                         << ")";
  return expectShape(*this, getResult(), {x[0], heads, x[1], x[2] / heads});
}

LogicalResult MergeHeadsOp::verify() {
  if (failed(expectRank(*this, getInput(), 4, "input"))) return failure();
  auto x = rankedType(getInput()).getShape();
  if (ShapedType::isDynamic(x[1]) || ShapedType::isDynamic(x[3]))
    return emitOpError("head count and head size must be static");
  return expectShape(*this, getResult(), {x[0], x[2], x[1] * x[3]});
}

LogicalResult PaddingMaskOp::verify() {
  if (failed(expectRank(*this, getIds(), 2, "ids"))) return failure();
  return expectShape(*this, getResult(), rankedType(getIds()).getShape());
}

LogicalResult MaskOp::verify() {
  if (failed(expectRank(*this, getScores(), 4, "scores")) ||
      failed(expectRank(*this, getKeyKeep(), 2, "key_keep")))
    return failure();
  auto s = rankedType(getScores()).getShape();
  auto keep = rankedType(getKeyKeep()).getShape();
  if (failed(expectDim(*this, keep[0], s[0], "key_keep batch dimension")) ||
      failed(expectDim(*this, keep[1], s[3], "key_keep length")))
    return failure();
  return expectShape(*this, getResult(), s);
}

LogicalResult LabelSmoothedXentOp::verify() {
  if (failed(expectRank(*this, getLogits(), 3, "logits")) ||
      failed(expectRank(*this, getTargets(), 2, "targets")))
    return failure();
  auto logits = rankedType(getLogits()).getShape();
  auto targets = rankedType(getTargets()).getShape();
  if (failed(expectDim(*this, targets[0], logits[0], "targets batch dimension")) ||
      failed(expectDim(*this, targets[1], logits[1], "targets length")))
    return failure();
  if (failed(expectRate(*this, getSmoothing().convertToDouble(), "smoothing"))) return failure();
  return expectShape(*this, getResult(), {});
}

//===----------------------------------------------------------------------===//
// Fused ops
//===----------------------------------------------------------------------===//

namespace {
LogicalResult expectLayout(Operation *op, StringRef layout) {
  if (layout != "plain" && layout != "packed")
    return op->emitOpError() << "weight_layout must be 'plain' or 'packed', got '" << layout << "'";
  return success();
}
}  // namespace

LogicalResult LinearOp::verify() {
  auto x = rankedType(getInput()).getShape();
  if (x.empty()) return emitOpError("input must have rank >= 1");
  if (failed(expectRank(*this, getWeight(), 2, "weight")) ||
      failed(expectRank(*this, getBias(), 1, "bias")))
    return failure();
  auto w = rankedType(getWeight()).getShape();
  if (failed(expectDim(*this, w[1], x.back(), "weight input dimension")) ||
      failed(expectDim(*this, rankedType(getBias()).getDimSize(0), w[0], "bias length")))
    return failure();
  StringRef act = getActivation();
  if (act != "none" && act != "relu" && act != "gelu")
    return emitOpError() << "activation must be 'none', 'relu' or 'gelu', got '" << act << "'";
  if (failed(expectLayout(*this, getWeightLayout()))) return failure();
  SmallVector<int64_t> expected(x.begin(), x.end());
  expected.back() = w[0];
  if (getResidual() && rankedType(getResidual()).getShape().size() != expected.size())
    return emitOpError("residual must have the result's rank");
  if (getResidual())
    for (auto [i, d] : llvm::enumerate(rankedType(getResidual()).getShape()))
      if (failed(expectDim(*this, d, expected[i], "residual dimension " + std::to_string(i))))
        return failure();
  return expectShape(*this, getResult(), expected);
}

LogicalResult FusedAttentionOp::verify() {
  for (auto [v, name] : {std::pair<Value, const char *>{getQ(), "q"}, {getK(), "k"}, {getV(), "v"}})
    if (failed(expectRank(*this, v, 3, name))) return failure();
  if (failed(expectRank(*this, getKeyKeep(), 2, "key_keep"))) return failure();
  const int64_t heads = int64_t(getHeads()), dk = int64_t(getHeadDim());
  if (heads <= 0 || dk <= 0) return emitOpError("heads and head_dim must be positive");
  auto q = rankedType(getQ()).getShape(), k = rankedType(getK()).getShape(),
       v = rankedType(getV()).getShape(), keep = rankedType(getKeyKeep()).getShape();
  for (auto [width, offset, name] :
       {std::tuple<int64_t, int64_t, const char *>{q[2], getQOffset(), "q"},
        {k[2], getKOffset(), "k"},
        {v[2], getVOffset(), "v"}}) {
    if (ShapedType::isDynamic(width)) return emitOpError() << name << " width must be static";
    if (offset < 0 || offset + heads * dk > width)
      return emitOpError() << name << " columns [" << offset << ", " << offset + heads * dk
                           << ") exceed its width " << width;
  }
  if (failed(expectDim(*this, k[0], q[0], "k batch dimension")) ||
      failed(expectDim(*this, v[0], q[0], "v batch dimension")) ||
      failed(expectDim(*this, v[1], k[1], "v length")) ||
      failed(expectDim(*this, keep[0], q[0], "key_keep batch dimension")) ||
      failed(expectDim(*this, keep[1], k[1], "key_keep length")))
    return failure();
  if (failed(expectRate(*this, getDropoutRate().convertToDouble(), "dropout_rate")))
    return failure();
  return expectShape(*this, getResult(), {q[0], q[1], heads * dk});
}

LogicalResult AddLayerNormOp::verify() {
  auto x = rankedType(getLhs()).getShape();
  if (x.empty()) return emitOpError("input must have rank >= 1");
  if (getLhs().getType() != getRhs().getType())
    return emitOpError("lhs and rhs must have the same type");
  if (failed(expectRank(*this, getGamma(), 1, "gamma")) ||
      failed(expectRank(*this, getBeta(), 1, "beta")) ||
      failed(expectDim(*this, rankedType(getGamma()).getDimSize(0), x.back(), "gamma length")) ||
      failed(expectDim(*this, rankedType(getBeta()).getDimSize(0), x.back(), "beta length")))
    return failure();
  if (getEpsilon().convertToDouble() <= 0.0) return emitOpError("epsilon must be positive");
  return expectShape(*this, getResult(), x);
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty()) return emitOpError("needs at least one operand");
  auto first = rankedType(getInputs()[0]).getShape();
  if (first.empty()) return emitOpError("operands must have rank >= 1");
  int64_t total = 0;
  for (Value v : getInputs()) {
    auto shape = rankedType(v).getShape();
    if (shape.size() != first.size()) return emitOpError("operands must have equal ranks");
    for (size_t i = 1; i < shape.size(); ++i)
      if (failed(expectDim(*this, shape[i], first[i], "operand dimension " + std::to_string(i))))
        return failure();
    total = (ShapedType::isDynamic(shape[0]) || ShapedType::isDynamic(total)) ? ShapedType::kDynamic
                                                                               : total + shape[0];
  }
  SmallVector<int64_t> expected(first.begin(), first.end());
  expected[0] = total;
  return expectShape(*this, getResult(), expected);
}

LogicalResult LastPositionOp::verify() {
  if (failed(expectRank(*this, getInput(), 3, "input"))) return failure();
  auto x = rankedType(getInput()).getShape();
  return expectShape(*this, getResult(), {x[0], 1, x[2]});
}

LogicalResult SliceLastOp::verify() {
  auto x = rankedType(getInput()).getShape();
  if (x.empty()) return emitOpError("input must have rank >= 1");
  if (ShapedType::isDynamic(x.back())) return emitOpError("last dimension must be static");
  // I64Attr accessors return uint64_t: compare signed so negative offsets are caught.
  const int64_t offset = int64_t(getOffset()), size = int64_t(getSize());
  if (offset < 0 || size <= 0 || offset + size > x.back())
    return emitOpError() << "columns [" << offset << ", " << offset + size
                         << ") exceed the last dimension " << x.back();
  SmallVector<int64_t> expected(x.begin(), x.end());
  expected.back() = getSize();
  return expectShape(*this, getResult(), expected);
}
