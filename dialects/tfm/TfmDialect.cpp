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

#define GET_OP_CLASSES
#include "tfm/TfmOps.cpp.inc"
