// The tfm dialect and its ops (generated from TfmOps.td).
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tfm/TfmRulesBridge.h"

#include "tfm/TfmDialect.h.inc"

#define GET_OP_CLASSES
#include "tfm/TfmOps.h.inc"
