// The checks ODS and the shape rules cannot express: what an operand must be defined by, and
// the ops that exist only in the compiler. Shapes, ranks, element types and attribute ranges of
// the ops the runtime executes are checked by ShapeRuleVerified (TfmRulesBridge.h), with the rules
// the runtime applies to artifacts.
#include "tfm/TfmDialect.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace tfm;

LogicalResult ParamOp::verify() {
  if (getName().empty()) return emitOpError("parameter name must not be empty");
  if (!getType().hasStaticShape()) return emitOpError("parameter shape must be static");
  return success();
}

LogicalResult PositionTableOp::verify() {
  if (int64_t(getMaxLen()) <= 0 || int64_t(getDim()) <= 0) return emitOpError("max_len and dim must be positive");
  if (getDim() % 2 != 0) return emitOpError("sinusoidal tables need an even dim, got ") << getDim();
  auto type = cast<RankedTensorType>(getType());
  if (type.getShape() != ArrayRef<int64_t>{int64_t(getMaxLen()), int64_t(getDim())})
    return emitOpError() << "result must be [" << getMaxLen() << ", " << getDim() << "], got " << type;
  return success();
}

LogicalResult StateOp::verify() {
  if (getName().empty()) return emitOpError("state name must not be empty");
  auto type = getType();
  if (type.getRank() < 1) return emitOpError("state must have rank >= 1");
  if (ShapedType::isDynamic(type.getShape().back())) return emitOpError("the last state dimension must be static");
  return success();
}

LogicalResult DropoutOp::verify() {
  if (getStep() && getSite().empty()) return emitOpError("a training dropout (with a step) needs a site name");
  return success();
}

namespace {
// A cache operand must be the state itself or a chain of in-place cache updates of it, so the
// runtime can bind every value of the chain to one buffer.
LogicalResult expectCacheChain(Operation *op, Value cache) {
  Operation *def = cache.getDefiningOp();
  if (!def || !isa<StateOp, CacheReorderOp, CacheWriteOp>(def))
    return op->emitOpError("cache must be a tfm.state or the result of tfm.cache_reorder/tfm.cache_write");
  return success();
}
}  // namespace

LogicalResult CacheReorderOp::verify() { return expectCacheChain(*this, getCache()); }
LogicalResult CacheWriteOp::verify() { return expectCacheChain(*this, getCache()); }

LogicalResult GradAccumulateOp::verify() {
  if (!getAccumulator().getDefiningOp<StateOp>()) return emitOpError("accumulator must be a tfm.state");
  return success();
}

LogicalResult AdamUpdateOp::verify() {
  if (!getParam().getDefiningOp<ParamOp>()) return emitOpError("param must be the result of tfm.param");
  for (auto [moment, name] : {std::pair<Value, const char *>{getM(), "m"}, {getV(), "v"}})
    if (!moment.getDefiningOp<StateOp>()) return emitOpError() << name << " must be a tfm.state (the optimizer state)";
  return success();
}
