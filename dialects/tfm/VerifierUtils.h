// Shape-check helpers shared by the verifier files. Dynamic dimensions (`?`) are compatible with
// anything; the runtime re-checks them against the bound sizes.
#pragma once

#include <string>

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

namespace tfm::verify {

using namespace mlir;

inline bool dimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

inline std::string dimStr(int64_t d) { return ShapedType::isDynamic(d) ? "?" : std::to_string(d); }

inline RankedTensorType rankedType(Value v) { return cast<RankedTensorType>(v.getType()); }

inline LogicalResult expectRank(Operation *op, Value v, int64_t rank, StringRef what) {
  int64_t actual = rankedType(v).getRank();
  if (actual != rank)
    return op->emitOpError() << what << " must have rank " << rank << ", got rank " << actual;
  return success();
}

inline LogicalResult expectDim(Operation *op, int64_t actual, int64_t expected, StringRef what) {
  if (!dimsCompatible(actual, expected))
    return op->emitOpError() << what << " is " << dimStr(actual) << " but must be "
                             << dimStr(expected);
  return success();
}

// Every result dimension must be compatible with the expected shape computed from operands.
inline LogicalResult expectShape(Operation *op, Value result, ArrayRef<int64_t> expected) {
  auto type = rankedType(result);
  if (type.getRank() != static_cast<int64_t>(expected.size()))
    return op->emitOpError() << "result must have rank " << expected.size() << ", got rank "
                             << type.getRank();
  for (auto [i, pair] : llvm::enumerate(llvm::zip(type.getShape(), expected)))
    if (!dimsCompatible(std::get<0>(pair), std::get<1>(pair)))
      return op->emitOpError() << "result dimension " << i << " is " << dimStr(std::get<0>(pair))
                               << " but must be " << dimStr(std::get<1>(pair));
  return success();
}

inline LogicalResult expectRate(Operation *op, double rate, StringRef what) {
  if (rate < 0.0 || rate >= 1.0)
    return op->emitOpError() << what << " must be in [0, 1), got " << rate;
  return success();
}

}  // namespace tfm::verify
