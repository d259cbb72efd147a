// Lowers a verified tfm module to the runtime's artifact (see runtime/include/tfmrt/artifact.h).
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include "spec/ModelSpec.h"
#include "tfmrt/artifact.h"

namespace tfmc {

// Every func.func in the module becomes an entry function. Emits MLIR diagnostics on ops the
// runtime cannot execute. Spec fields are recorded as artifact metadata.
mlir::LogicalResult lowerToArtifact(mlir::ModuleOp module, const ModelSpec &spec,
                                    tfmrt::Artifact &artifact);

}  // namespace tfmc
