// Shape contracts of the incremental-decoding ops: session state, the K/V cache and the attention
// of one new position.
#include "tfm/TfmDialect.h"

#include "VerifierUtils.h"

using namespace mlir;
using namespace tfm;
using namespace tfm::verify;

namespace {

// A cache operand must be the state itself or a chain of in-place cache updates of it, so the
// runtime can bind every value of the chain to one buffer.
LogicalResult expectCacheChain(Operation *op, Value cache) {
  Operation *def = cache.getDefiningOp();
  if (!def || !isa<StateOp, CacheReorderOp, CacheWriteOp>(def))
    return op->emitOpError("cache must be a tfm.state or the result of tfm.cache_reorder/tfm.cache_write");
  return success();
}

LogicalResult expectStep(Operation *op, Value step) { return expectRank(op, step, 0, "step"); }

LogicalResult expectHeads(Operation *op, int64_t heads, int64_t dk) {
  if (heads <= 0 || dk <= 0) return op->emitOpError("heads and head_dim must be positive");
  return success();
}

LogicalResult expectColumns(Operation *op, int64_t width, int64_t offset, int64_t needed, StringRef name) {
  if (ShapedType::isDynamic(width)) return op->emitOpError() << name << " width must be static";
  if (offset < 0 || offset + needed > width)
    return op->emitOpError() << name << " columns [" << offset << ", " << offset + needed << ") exceed its width "
                             << width;
  return success();
}

}  // namespace

LogicalResult StateOp::verify() {
  if (getName().empty()) return emitOpError("state name must not be empty");
  auto type = getType();
  if (type.getRank() < 1) return emitOpError("state must have rank >= 1");
  if (ShapedType::isDynamic(type.getShape().back())) return emitOpError("the last state dimension must be static");
  return success();
}

LogicalResult CacheReorderOp::verify() {
  if (failed(expectCacheChain(*this, getCache())) || failed(expectRank(*this, getCache(), 3, "cache")) ||
      failed(expectRank(*this, getParents(), 1, "parents")) || failed(expectStep(*this, getStep())))
    return failure();
  return success();
}

LogicalResult CacheWriteOp::verify() {
  if (failed(expectCacheChain(*this, getCache())) || failed(expectRank(*this, getCache(), 3, "cache")) ||
      failed(expectRank(*this, getUpdate(), 3, "update")) || failed(expectStep(*this, getStep())))
    return failure();
  auto cache = rankedType(getCache()).getShape(), update = rankedType(getUpdate()).getShape();
  if (failed(expectDim(*this, update[1], 1, "update length")) ||
      failed(expectDim(*this, update[2], cache[2], "update width")))
    return failure();
  return success();
}

LogicalResult CachedAttentionOp::verify() {
  for (auto [v, name] : {std::pair<Value, const char *>{getQ(), "q"}, {getKCache(), "k_cache"}, {getVCache(), "v_cache"}})
    if (failed(expectRank(*this, v, 3, name))) return failure();
  if (failed(expectStep(*this, getStep()))) return failure();
  const int64_t heads = int64_t(getHeads()), dk = int64_t(getHeadDim());
  if (failed(expectHeads(*this, heads, dk))) return failure();
  auto q = rankedType(getQ()).getShape(), k = rankedType(getKCache()).getShape(),
       v = rankedType(getVCache()).getShape();
  if (failed(expectDim(*this, q[1], 1, "q length")) ||
      failed(expectColumns(*this, q[2], int64_t(getQOffset()), heads * dk, "q")) ||
      failed(expectDim(*this, k[2], heads * dk, "k_cache width")) ||
      failed(expectDim(*this, v[2], heads * dk, "v_cache width")) ||
      failed(expectDim(*this, v[0], k[0], "v_cache rows")) || failed(expectDim(*this, v[1], k[1], "v_cache length")))
    return failure();
  return expectShape(*this, getResult(), {q[0], 1, heads * dk});
}

LogicalResult GatheredAttentionOp::verify() {
  for (auto [v, name] : {std::pair<Value, const char *>{getQ(), "q"}, {getK(), "k"}, {getV(), "v"}})
    if (failed(expectRank(*this, v, 3, name))) return failure();
  if (failed(expectRank(*this, getKeyKeep(), 2, "key_keep")) || failed(expectRank(*this, getRows(), 1, "rows")))
    return failure();
  const int64_t heads = int64_t(getHeads()), dk = int64_t(getHeadDim());
  if (failed(expectHeads(*this, heads, dk))) return failure();
  auto q = rankedType(getQ()).getShape(), k = rankedType(getK()).getShape(), v = rankedType(getV()).getShape(),
       keep = rankedType(getKeyKeep()).getShape(), rows = rankedType(getRows()).getShape();
  if (failed(expectDim(*this, q[1], 1, "q length")) ||
      failed(expectColumns(*this, q[2], int64_t(getQOffset()), heads * dk, "q")) ||
      failed(expectColumns(*this, k[2], int64_t(getKOffset()), heads * dk, "k")) ||
      failed(expectColumns(*this, v[2], int64_t(getVOffset()), heads * dk, "v")) ||
      failed(expectDim(*this, v[0], k[0], "v batch dimension")) || failed(expectDim(*this, v[1], k[1], "v length")) ||
      failed(expectDim(*this, keep[0], k[0], "key_keep batch dimension")) ||
      failed(expectDim(*this, keep[1], k[1], "key_keep length")) ||
      failed(expectDim(*this, rows[0], q[0], "rows length")))
    return failure();
  return expectShape(*this, getResult(), {q[0], 1, heads * dk});
}

LogicalResult AddPositionAtOp::verify() {
  if (failed(expectRank(*this, getInput(), 3, "input")) || failed(expectRank(*this, getTable(), 2, "table")) ||
      failed(expectStep(*this, getStep())))
    return failure();
  auto x = rankedType(getInput()).getShape(), table = rankedType(getTable()).getShape();
  if (failed(expectDim(*this, x[1], 1, "input length")) || failed(expectDim(*this, table[1], x[2], "table width")))
    return failure();
  return expectShape(*this, getResult(), x);
}
