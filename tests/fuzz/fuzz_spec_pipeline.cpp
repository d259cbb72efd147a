// Model specs end to end: fuzz_spec_import's parser and importer checks, then every pass and the lowering
// to an artifact -- or a refusal with an error (sizes too large to build), never an exception.
// A fresh MLIRContext per input (the pipeline registers passes and state on it).
#include "FuzzTarget.h"
#include "Pipeline.h"
#include "import/SpecToTfm.h"
#include "tfmrt/artifact.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "spec/ModelSpec.h"
#include "tfm/TfmDialect.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string text(reinterpret_cast<const char *>(data), size);
  tfmc::ModelSpec spec;
  std::vector<tfmc::SpecDiagnostic> diags;
  if (!tfmc::parseModelSpecText(text, "fuzz.yaml", spec, diags)) {
    FUZZ_CHECK(!diags.empty());
    for (const auto &d : diags) FUZZ_CHECK(!d.render().empty());
    return 0;
  }
  mlir::MLIRContext ctx;
  ctx.loadDialect<tfm::TfmDialect, mlir::func::FuncDialect>();
  ctx.printOpOnDiagnostic(false);
  mlir::ScopedDiagnosticHandler quiet(&ctx, [](mlir::Diagnostic &) { return mlir::success(); });
  auto module = tfmc::importModelSpec(spec, ctx, tfmc::ImportOptions{.gradients = true, .trainStep = true, .translate = true});
  FUZZ_CHECK(module);
  FUZZ_CHECK(mlir::succeeded(mlir::verify(*module)));
  tfmc::PipelineOptions pipeline;
  pipeline.trainStep = pipeline.translate = true;
  tfmrt::Artifact artifact;
  (void)tfmc::compileModelSpec(spec, ctx, artifact, pipeline);
  return 0;
}
