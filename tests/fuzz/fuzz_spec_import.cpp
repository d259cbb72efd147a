// Model specs through the parser and the importer (fuzz_spec covers the parser alone, faster):
// a spec that parses is imported into tfm IR (forward, gradients, train_step and translate
// entries), which must verify -- the importer builds only valid IR from a valid spec. One
// MLIRContext for the whole campaign (one per input was most of the time); each input's module
// is destroyed before the next. Most of what remains is the verifier's op rules.
// Stacks deeper than kMaxLayers are imported kMaxLayers deep: the importer emits the same ops for
// every layer, so depth adds no coverage, but time grows with it and libFuzzer's corpus drifts
// toward deep specs (82-layer inputs took 0.9 s each under ASan; the rate fell from 668 to 130
// executions per second). Depth limits themselves are the parser's, fuzzed by fuzz_spec.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "FuzzTarget.h"
#include "import/SpecToTfm.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "spec/ModelSpec.h"
#include "tfm/TfmDialect.h"

namespace {
constexpr int64_t kMaxLayers = 3;

mlir::MLIRContext &context() {
  static mlir::MLIRContext *ctx = [] {
    // Single-threaded: the verifier's per-function worker threads only contend with the
    // campaign's other processes (one per core).
    auto *c = new mlir::MLIRContext(mlir::MLIRContext::Threading::DISABLED);
    c->loadDialect<tfm::TfmDialect, mlir::func::FuncDialect>();
    c->printOpOnDiagnostic(false);
    c->getDiagEngine().registerHandler([](mlir::Diagnostic &) { return mlir::success(); });
    return c;
  }();
  return *ctx;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string text(reinterpret_cast<const char *>(data), size);
  tfmc::ModelSpec spec;
  std::vector<tfmc::SpecDiagnostic> diags;
  if (!tfmc::parseModelSpecText(text, "fuzz.yaml", spec, diags)) return 0;  // fuzz_spec's ground
  spec.model.encoder_layers = std::min(spec.model.encoder_layers, kMaxLayers);
  spec.model.decoder_layers = std::min(spec.model.decoder_layers, kMaxLayers);
  auto module = tfmc::importModelSpec(spec, context(), tfmc::ImportOptions{.gradients = true, .trainStep = true, .translate = true});
  FUZZ_CHECK(module);
  FUZZ_CHECK(mlir::succeeded(mlir::verify(*module)));
  return 0;
}
