// Translation's building blocks on one build of a spec (weights from a seed, random ids):
//   Encode/<spec>/B<b>                 encode (memory + every layer's cross K/V), source length 24
//   DecodeStep/<spec>/B<b>/beam<k>/t16 one decode_step for B x beam hypotheses at position 16
//                                      (K/V cache of positions 0..15 in session state)
//   DecodeFull/<spec>/B<b>/beam<k>/t16 the reference path for the same token: `decode` over the
//                                      whole 17-token prefix
// hyp/s counts hypotheses advanced by one token per second. DecodeFull / DecodeStep is the
// per-token gain of the cache at that position (it grows with the position). <spec>@int8 is the
// same spec compiled with --precision=int8 (int8 GEMMs; f32 GEMMs on CPUs without AVX512-VNNI).
#include <map>
#include <memory>

#include <benchmark/benchmark.h>

#include "Pipeline.h"
#include "tfmrt/runtime.h"

namespace {

constexpr int64_t kSrcLen = 24, kStep = 16;

tfmrt::Model *modelFor(const std::string &spec, std::string &error) {
  static std::map<std::string, std::unique_ptr<tfmrt::Model>> cache;
  auto it = cache.find(spec);
  if (it != cache.end()) return it->second.get();
  const size_t at = spec.find('@');
  const std::string name = spec.substr(0, at), precision = at == std::string::npos ? "" : spec.substr(at + 1);
  tfmc::ModelSpec parsed;
  std::vector<tfmc::SpecDiagnostic> diags;
  if (!tfmc::parseModelSpecFile(std::string(TFMC_SOURCE_DIR) + "/models/" + name + ".yaml", parsed, diags)) {
    error = diags.empty() ? "spec error" : diags[0].render();
    return nullptr;
  }
  tfmc::PipelineOptions pipeline;
  pipeline.translate = true;
  pipeline.int8 = precision == "int8";
  mlir::MLIRContext context;
  tfmrt::Artifact artifact;
  if (failed(tfmc::compileModelSpec(parsed, context, artifact, pipeline))) {
    error = "compilation failed";
    return nullptr;
  }
  std::unique_ptr<tfmrt::Model> model;
  tfmrt::Status status = tfmrt::Model::fromArtifact(std::move(artifact), {}, model);
  if (status.ok()) status = model->initWeights(1);
  if (!status.ok()) {
    error = status.message();
    return nullptr;
  }
  return (cache[spec] = std::move(model)).get();
}

std::vector<int32_t> randomIds(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto &v : ids) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    v = int32_t(3 + (seed >> 33) % uint64_t(vocab - 3));
  }
  return ids;
}

struct Setup {
  tfmrt::Model *model = nullptr;
  std::unique_ptr<tfmrt::Session> session;
  tfmrt::Tensor src;
  std::vector<tfmrt::Tensor> encoded;
  int64_t vocab = 0;
};

bool prepare(benchmark::State &state, const std::string &spec, int64_t batch, Setup &s) {
  std::string error;
  s.model = modelFor(spec, error);
  tfmrt::Status st = s.model ? tfmrt::Session::create(*s.model, s.session) : tfmrt::Status::OK();
  if (!s.model || !st.ok()) {
    state.SkipWithError((s.model ? st.message() : error).c_str());
    return false;
  }
  s.vocab = std::stoll(s.model->artifact().metadata.at("model.tgt_vocab_size"));
  s.src = tfmrt::Tensor::i32({batch, kSrcLen}, randomIds(batch * kSrcLen, s.vocab, 7));
  st = s.session->run("encode", {s.src}, s.encoded);
  if (!st.ok()) {
    state.SkipWithError(st.message().c_str());
    return false;
  }
  return true;
}

void encode(benchmark::State &state, std::string spec, int64_t batch) {
  Setup s;
  if (!prepare(state, spec, batch, s)) return;
  for (auto _ : state)
    if (auto st = s.session->run("encode", {s.src}, s.encoded); !st.ok()) return state.SkipWithError(st.message().c_str());
  state.counters["sentences/s"] = benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
}

std::vector<tfmrt::Tensor> stepInputs(const Setup &s, int64_t batch, int64_t beam, int64_t step) {
  const int64_t R = batch * beam;
  std::vector<int32_t> parents(static_cast<size_t>(R)), rows(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) parents[r] = int32_t(r), rows[r] = int32_t(r / beam);
  std::vector<tfmrt::Tensor> in{tfmrt::Tensor::i32({R, 1}, randomIds(R, s.vocab, 11 + uint64_t(step))),
                                tfmrt::Tensor::i32({R}, std::vector<int32_t>(size_t(R), int32_t(step))),
                                tfmrt::Tensor::i32({R}, parents),
                                tfmrt::Tensor::i32({R}, rows), s.src};
  for (size_t i = 1; i < s.encoded.size(); ++i) in.push_back(s.encoded[i]);
  return in;
}

void decodeStep(benchmark::State &state, std::string spec, int64_t batch, int64_t beam) {
  Setup s;
  if (!prepare(state, spec, batch, s)) return;
  std::vector<tfmrt::Tensor> out;
  tfmrt::Status st = s.session->bindStates({batch * beam, kStep + 1});
  for (int64_t t = 0; t < kStep && st.ok(); ++t) st = s.session->run("decode_step", stepInputs(s, batch, beam, t), out);
  const auto in = stepInputs(s, batch, beam, kStep);
  if (st.ok()) st = s.session->run("decode_step", in, out);
  if (!st.ok()) return state.SkipWithError(st.message().c_str());
  for (auto _ : state)
    if (auto e = s.session->run("decode_step", in, out); !e.ok()) return state.SkipWithError(e.message().c_str());
  state.counters["hyp/s"] = benchmark::Counter(double(batch * beam), benchmark::Counter::kIsIterationInvariantRate);
}

void decodeFull(benchmark::State &state, std::string spec, int64_t batch, int64_t beam) {
  Setup s;
  if (!prepare(state, spec, batch, s)) return;
  const int64_t R = batch * beam, T = kStep + 1, S = kSrcLen, D = s.encoded[0].shape[2];
  tfmrt::Tensor srcRep(tfmrt::DType::I32, {R, S}), memRep(tfmrt::DType::F32, {R, S, D});
  for (int64_t r = 0; r < R; ++r) {
    std::copy(s.src.data<int32_t>() + (r / beam) * S, s.src.data<int32_t>() + (r / beam + 1) * S,
              srcRep.data<int32_t>() + r * S);
    std::copy(s.encoded[0].data<float>() + (r / beam) * S * D, s.encoded[0].data<float>() + (r / beam + 1) * S * D,
              memRep.data<float>() + r * S * D);
  }
  std::vector<int32_t> prefix = randomIds(R * T, s.vocab, 13);
  for (int64_t r = 0; r < R; ++r) prefix[r * T] = 1;  // BOS
  const std::vector<tfmrt::Tensor> in{srcRep, memRep, tfmrt::Tensor::i32({R, T}, prefix)};
  std::vector<tfmrt::Tensor> out;
  if (auto st = s.session->run("decode", in, out); !st.ok()) return state.SkipWithError(st.message().c_str());
  for (auto _ : state)
    if (auto e = s.session->run("decode", in, out); !e.ok()) return state.SkipWithError(e.message().c_str());
  state.counters["hyp/s"] = benchmark::Counter(double(R), benchmark::Counter::kIsIterationInvariantRate);
}

void registerAll() {
  for (const char *spec : {"small", "small@int8", "transformer-base", "transformer-base@int8"})
    for (int64_t batch : {1, 32, 128}) {
      const std::string b = "/B" + std::to_string(batch);
      benchmark::RegisterBenchmark(("Encode/" + std::string(spec) + b).c_str(), encode, spec, batch)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      for (int64_t beam : {1, 4}) {
        const std::string tail = std::string(spec) + b + "/beam" + std::to_string(beam) + "/t" + std::to_string(kStep);
        benchmark::RegisterBenchmark(("DecodeStep/" + tail).c_str(), decodeStep, spec, batch, beam)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        benchmark::RegisterBenchmark(("DecodeFull/" + tail).c_str(), decodeFull, spec, batch, beam)
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
