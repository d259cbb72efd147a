// `tfmc compile`: spec -> tfm IR -> verified -> artifact. The only TU of the CLI that sees MLIR.
#include <iostream>

#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/MLIRContext.h"

#include "Commands.h"
#include "Pipeline.h"
#include "spec/ModelSpec.h"

namespace tfmc {
namespace {

bool loadSpec(const std::string &path, ModelSpec &spec) {
  std::vector<SpecDiagnostic> diags;
  bool ok = path.empty()
                ? parseModelSpecText(embeddedDemoSpec(), "<embedded small.yaml>", spec, diags)
                : parseModelSpecFile(path, spec, diags);
  if (ok) return true;
  for (const SpecDiagnostic &d : diags) std::cerr << d.render();
  std::cerr << "tfmc: " << diags.size() << " error(s) in "
            << (path.empty() ? "<embedded small.yaml>" : path) << "; nothing written\n";
  return false;
}

std::string defaultOutputPath(const ModelSpec &spec) { return spec.name + ".tfmx"; }

uint64_t paramCount(const tfmrt::Artifact &artifact) {
  uint64_t n = 0;
  for (const auto &p : artifact.params) {
    uint64_t e = 1;
    for (int64_t d : p.shape) e *= d;
    n += e;
  }
  return n;
}

}  // namespace

bool compileSpecToArtifactFile(const std::string &specPath, const std::string &outPath,
                               bool quiet) {
  ModelSpec spec;
  if (!loadSpec(specPath, spec)) return false;
  mlir::MLIRContext context;
  tfmrt::Artifact artifact;
  if (failed(compileModelSpec(spec, context, artifact))) {
    std::cerr << "tfmc: compilation failed; nothing written\n";
    return false;
  }
  std::string out = outPath.empty() ? defaultOutputPath(spec) : outPath;
  tfmrt::Status status = tfmrt::writeArtifactFile(artifact, out);
  if (!status.ok()) {
    std::cerr << "tfmc: error: " << status.message() << "\n";
    return false;
  }
  if (!quiet) {
    size_t nodes = 0;
    for (const auto &fn : artifact.functions) nodes += fn.nodes.size();
    std::cout << "compiled " << (specPath.empty() ? "<embedded small.yaml>" : specPath) << " -> "
              << out << ": " << artifact.params.size() << " parameter tensors ("
              << paramCount(artifact) << " weights), " << artifact.functions.size()
              << " entry function(s), " << nodes << " kernel invocations\n";
  }
  return true;
}

int compileCommand(const CommandLine &cl) {
  auto unknown = cl.unknown({"o", "emit", "quiet"});
  if (!unknown.empty()) {
    std::cerr << "tfmc compile: error: unknown option --" << unknown[0] << "\n";
    return 2;
  }
  if (cl.positionals.size() != 1) {
    std::cerr << "tfmc compile: error: expected exactly one spec file (tfmc compile <spec.yaml>)\n";
    return 2;
  }
  const std::string &specPath = cl.positionals[0];
  std::string emit = cl.get("emit", "artifact");
  if (emit == "mlir") {
    ModelSpec spec;
    if (!loadSpec(specPath, spec)) return 1;
    mlir::MLIRContext context;
    auto module = buildModule(spec, context);
    if (!module) return 1;
    std::string out;
    llvm::raw_string_ostream os(out);
    mlir::OpPrintingFlags flags;
    module->print(os, flags);
    std::cout << out << "\n";
    return 0;
  }
  if (emit != "artifact") {
    std::cerr << "tfmc compile: error: --emit must be 'artifact' or 'mlir', got '" << emit << "'\n";
    return 2;
  }
  return compileSpecToArtifactFile(specPath, cl.get("o"), cl.has("quiet")) ? 0 : 1;
}

}  // namespace tfmc
