// The compilation pipeline, in one place: import -> verify -> (passes) -> lower to artifact.
#pragma once

#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include "spec/ModelSpec.h"
#include "tfmrt/artifact.h"

namespace tfmc {

struct PipelineOptions {
  bool verifyEach = true;
};

// Imports and verifies; diagnostics go to the context's handler (stderr by default).
mlir::OwningOpRef<mlir::ModuleOp> buildModule(const ModelSpec &spec, mlir::MLIRContext &ctx,
                                              const PipelineOptions &options = {});

// Full pipeline: returns failure (with diagnostics emitted) if any stage fails.
mlir::LogicalResult compileModelSpec(const ModelSpec &spec, mlir::MLIRContext &ctx,
                                     tfmrt::Artifact &artifact,
                                     const PipelineOptions &options = {});

}  // namespace tfmc
