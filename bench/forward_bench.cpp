// Whole-model forward pass (logits + loss) on full-length rows, fused and unfused builds of the
// same spec: tokens/s = B * (S + T) / time, GFLOP/s from the analytic count in spec/FlopCount.h.
// Each variant is compiled in-process once; weights come from a seed.
#include <map>
#include <memory>

#include <benchmark/benchmark.h>

#include "Pipeline.h"
#include "spec/FlopCount.h"
#include "tfmrt/runtime.h"

namespace {

struct Shape {
  int64_t batch, srcLen, tgtLen;
};

std::unique_ptr<tfmrt::Model> loadModel(const std::string &spec, tfmrt::KernelBackend backend,
                                        const std::string &fusion, tfmc::ModelSpec &parsed,
                                        std::string &error) {
  std::vector<tfmc::SpecDiagnostic> diags;
  if (!tfmc::parseModelSpecFile(std::string(TFMC_SOURCE_DIR) + "/models/" + spec + ".yaml",
                                parsed, diags)) {
    error = diags.empty() ? "spec error" : diags[0].render();
    return nullptr;
  }
  tfmc::PipelineOptions pipeline;
  if (!pipeline.parseFusionList(fusion, error)) return nullptr;
  mlir::MLIRContext context;
  tfmrt::Artifact artifact;
  if (failed(tfmc::compileModelSpec(parsed, context, artifact, pipeline))) {
    error = "compilation failed";
    return nullptr;
  }
  tfmrt::RuntimeOptions options;
  options.backend = backend;
  std::unique_ptr<tfmrt::Model> model;
  tfmrt::Status status = tfmrt::Model::fromArtifact(std::move(artifact), options, model);
  if (status.ok()) status = model->initWeights(1);
  if (!status.ok()) {
    error = status.message();
    return nullptr;
  }
  return model;
}

std::vector<tfmrt::Tensor> fullLengthBatch(const tfmrt::Artifact &a, Shape shape) {
  auto meta = [&](const char *k) { return std::stoll(a.metadata.at(k)); };
  const int64_t srcVocab = meta("model.src_vocab_size"), tgtVocab = meta("model.tgt_vocab_size");
  uint64_t state = 12345;
  auto next = [&](int64_t vocab) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return int32_t(3 + (state >> 33) % uint64_t(vocab - 3));
  };
  std::vector<int32_t> src(shape.batch * shape.srcLen), tgtIn(shape.batch * shape.tgtLen),
      tgtOut(shape.batch * shape.tgtLen);
  for (auto &v : src) v = next(srcVocab);
  for (auto &v : tgtIn) v = next(tgtVocab);
  for (auto &v : tgtOut) v = next(tgtVocab);
  return {tfmrt::Tensor::i32({shape.batch, shape.srcLen}, src),
          tfmrt::Tensor::i32({shape.batch, shape.tgtLen}, tgtIn),
          tfmrt::Tensor::i32({shape.batch, shape.tgtLen}, tgtOut)};
}

void forward(benchmark::State &state, std::string spec, tfmrt::KernelBackend backend,
             std::string fusion, Shape shape) {
  std::string error;
  tfmc::ModelSpec parsed;
  auto model = loadModel(spec, backend, fusion, parsed, error);
  if (!model) {
    state.SkipWithError(error.c_str());
    return;
  }
  auto inputs = fullLengthBatch(model->artifact(), shape);
  std::vector<tfmrt::Tensor> outputs;
  tfmrt::Status status = model->run("forward", inputs, outputs);  // binds shapes, allocates
  if (!status.ok()) {
    state.SkipWithError(status.message().c_str());
    return;
  }
  for (auto _ : state) {
    status = model->run("forward", inputs, outputs);
    if (!status.ok()) {
      state.SkipWithError(status.message().c_str());
      return;
    }
  }
  state.counters["tokens/s"] = benchmark::Counter(
      double(shape.batch * (shape.srcLen + shape.tgtLen)), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(
      tfmc::forwardFlops(parsed, shape.batch, shape.srcLen, shape.tgtLen) / 1e9,
      benchmark::Counter::kIsIterationInvariantRate);
}

void registerAll() {
  using tfmrt::KernelBackend;
  struct Entry {
    const char *spec;
    Shape shape;
    bool reference;  // the reference kernels are too slow for the large specs
  };
  for (const Entry &e : {Entry{"tiny", {4, 9, 8}, true}, Entry{"small", {32, 32, 32}, false},
                         Entry{"transformer-base", {32, 64, 64}, false}}) {
    std::string shape = std::to_string(e.shape.batch) + "x" + std::to_string(e.shape.srcLen) +
                        "+" + std::to_string(e.shape.tgtLen);
    for (const char *fusion : {"all", "none"})
      for (auto backend : {KernelBackend::Dnnl, KernelBackend::Reference}) {
        if (backend == KernelBackend::Reference && !e.reference) continue;
        std::string name = "Forward/" + std::string(e.spec) + "/" + shape + "/fusion=" + fusion +
                           (backend == KernelBackend::Dnnl ? "/dnnl" : "/reference");
        benchmark::RegisterBenchmark(name.c_str(), forward, e.spec, backend, fusion, e.shape)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
  }
}

}  // namespace

int main(int argc, char **argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
