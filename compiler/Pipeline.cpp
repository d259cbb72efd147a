#include "Pipeline.h"

#include "mlir/IR/Verifier.h"

#include "import/SpecToTfm.h"
#include "lower/TfmToArtifact.h"

namespace tfmc {

mlir::OwningOpRef<mlir::ModuleOp> buildModule(const ModelSpec &spec, mlir::MLIRContext &ctx,
                                              const PipelineOptions &options) {
  auto module = importModelSpec(spec, ctx);
  if (options.verifyEach && failed(mlir::verify(*module))) {
    mlir::emitError(module->getLoc()) << "internal error: the imported tfm IR does not verify";
    return nullptr;
  }
  return module;
}

mlir::LogicalResult compileModelSpec(const ModelSpec &spec, mlir::MLIRContext &ctx,
                                     tfmrt::Artifact &artifact, const PipelineOptions &options) {
  auto module = buildModule(spec, ctx, options);
  if (!module) return mlir::failure();
  return lowerToArtifact(*module, spec, artifact);
}

}  // namespace tfmc
