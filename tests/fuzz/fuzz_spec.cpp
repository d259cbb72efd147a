// Model specs: any text is parsed into a spec or refused with located diagnostics, never a
// crash; a spec that parses is imported into tfm IR, which must verify (the importer builds
// only valid IR from a valid spec), and then compiled through every pass and lowered to an
// artifact -- or refused with an error (sizes too large to build), never an exception.
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
