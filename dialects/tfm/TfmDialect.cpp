#include "tfm/TfmDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace tfm;

#include "tfm/TfmDialect.cpp.inc"

void TfmDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tfm/TfmOps.cpp.inc"
      >();
}

// custom<SameOrAllTypes>: `: T` when the operands and the result all have type T, else
// `: (T1, T2) -> T3` (ops whose verifier accepts compatible shapes must print each type to parse
// back what they printed).
static void printSameOrAllTypes(OpAsmPrinter &p, Operation *, ArrayRef<Type> operands, Type result) {
  if (llvm::all_of(operands, [&](Type t) { return t == result; })) {
    p << result;
    return;
  }
  p.printFunctionalType(TypeRange(operands), TypeRange(result));
}
static void printSameOrAllTypes(OpAsmPrinter &p, Operation *op, Type input, Type result) {
  printSameOrAllTypes(p, op, ArrayRef<Type>{input}, result);
}
static void printSameOrAllTypes(OpAsmPrinter &p, Operation *op, Type lhs, Type rhs, Type result) {
  printSameOrAllTypes(p, op, ArrayRef<Type>{lhs, rhs}, result);
}

static ParseResult parseSameOrAllTypes(OpAsmParser &parser, MutableArrayRef<Type *> operands, Type &result) {
  if (failed(parser.parseOptionalLParen())) {  // `: T`
    if (parser.parseType(result)) return failure();
    for (Type *t : operands) *t = result;
    return success();
  }
  for (size_t i = 0; i < operands.size(); ++i)
    if ((i > 0 && parser.parseComma()) || parser.parseType(*operands[i])) return failure();
  return failure(parser.parseRParen() || parser.parseArrow() || parser.parseType(result));
}
static ParseResult parseSameOrAllTypes(OpAsmParser &parser, Type &input, Type &result) {
  Type *operands[] = {&input};
  return parseSameOrAllTypes(parser, operands, result);
}
static ParseResult parseSameOrAllTypes(OpAsmParser &parser, Type &lhs, Type &rhs, Type &result) {
  Type *operands[] = {&lhs, &rhs};
  return parseSameOrAllTypes(parser, operands, result);
}

#define GET_OP_CLASSES
#include "tfm/TfmOps.cpp.inc"
