// Attention alone, fused vs unfused, through tfmrt::Model::run on two tiny hand-built artifacts
// (no compiler, no MLIR): self-attention with a key padding mask, q = k = v length S, H = 8 heads
// of d_k = 64 (d_model 512), B in {1, 32}, S in {16, 64, 256, 1024, 2048}, 2 threads.
//
//   unfused: inputs q, k, v [B, S, 512] + key_keep [B, S]; split_heads x3,
//            batch_matmul(transpose_b), scale, mask, softmax, batch_matmul, merge_heads
//   fused:   the same inputs into one tfm.fused_attention node
//   fused_bf16: that node with precision "bf16" (bf16 Q.K and P.V products, f32 softmax; f32 on a
//            CPU without AVX512-BF16 or with AMX: the label names the kernel that ran;
//            TFMRT_ATTENTION_IMPL=avx512_bf16 forces the bf16 kernel on it, also with AMX; the
//            f32 node stays f32)
//
// Both get the same inputs. Per benchmark: time, tokens/s (B * S / time) and peak_bytes = what
// Model::run allocated for the call (tfmrt::Model::lastMemoryPlan): the arena of intermediates
// (activation memory; the inputs are the caller's and identical in both) plus kernel scratch
// (the fused kernel's per-thread tiles and packed K/V rows, ~0.6 MB per thread at S = 1024).
//
// Padding: batch row b keeps its first S - (b mod 4) * S / 16 keys (B = 1: no padding), ~9% of the
// keys on average at B = 32. The unfused chain computes the padded keys and masks them; the fused
// kernel skips them.
//
// Unfused B = 32, S = 2048 would need 2 x 4.3 GB of scores and is not registered.
// bench/attention_ratios.py runs this with JSON output and prints the fused / unfused ratios.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_builder.h"
#include "tfmrt/artifact.h"
#include "tfmrt/runtime.h"
#include "tfmrt/tensor.h"

namespace {

using tfmrt::AttrValue;
using tfmrt::DType;
using Shape = std::vector<int64_t>;
using bench::Builder;

constexpr int64_t kHeads = 8, kHeadDim = 64, kModel = kHeads * kHeadDim;
// 2 threads (the setting); ATTENTION_BENCH_THREADS overrides it for diagnosis.
int benchThreads() { return bench::threadsFromEnv("ATTENTION_BENCH_THREADS", 2); }

const double kScale = 1.0 / std::sqrt(double(kHeadDim));

tfmrt::Artifact unfusedArtifact(int64_t B, int64_t S) {
  Builder f("attention_unfused", "attention_bench");
  const uint32_t q = f.input("q", DType::F32, {B, S, kModel});
  const uint32_t k = f.input("k", DType::F32, {B, S, kModel});
  const uint32_t v = f.input("v", DType::F32, {B, S, kModel});
  const uint32_t keep = f.input("key_keep", DType::Bool, {B, S});
  const std::map<std::string, AttrValue> heads{{"heads", AttrValue::ofInt(kHeads)}};
  const Shape split{B, kHeads, S, kHeadDim}, scores{B, kHeads, S, S};
  const uint32_t qh = f.op("tfm.split_heads", {q}, split, heads);
  const uint32_t kh = f.op("tfm.split_heads", {k}, split, heads);
  const uint32_t vh = f.op("tfm.split_heads", {v}, split, heads);
  uint32_t s = f.op("tfm.batch_matmul", {qh, kh}, scores, {{"transpose_b", AttrValue::ofInt(1)}});
  s = f.op("tfm.scale", {s}, scores, {{"factor", AttrValue::ofFloat(kScale)}});
  s = f.op("tfm.mask", {s, keep}, scores, {{"causal", AttrValue::ofInt(0)}});
  s = f.op("tfm.softmax", {s}, scores);
  const uint32_t o = f.op("tfm.batch_matmul", {s, vh}, split);
  return f.finish(f.op("tfm.merge_heads", {o}, {B, S, kModel}));
}

tfmrt::Artifact fusedArtifact(int64_t B, int64_t S, bool bf16) {
  Builder f("attention_fused", "attention_bench");
  const uint32_t q = f.input("q", DType::F32, {B, S, kModel});
  const uint32_t k = f.input("k", DType::F32, {B, S, kModel});
  const uint32_t v = f.input("v", DType::F32, {B, S, kModel});
  const uint32_t keep = f.input("key_keep", DType::Bool, {B, S});
  return f.finish(f.op("tfm.fused_attention", {q, k, v, keep}, {B, S, kModel},
                       {{"heads", AttrValue::ofInt(kHeads)},
                        {"head_dim", AttrValue::ofInt(kHeadDim)},
                        {"q_offset", AttrValue::ofInt(0)},
                        {"k_offset", AttrValue::ofInt(0)},
                        {"v_offset", AttrValue::ofInt(0)},
                        {"scale", AttrValue::ofFloat(kScale)},
                        {"causal", AttrValue::ofInt(0)},
                        {"precision", AttrValue::ofString(bf16 ? "bf16" : "f32")}}));
}

std::vector<tfmrt::Tensor> makeInputs(int64_t B, int64_t S) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<tfmrt::Tensor> in;
  for (int i = 0; i < 3; ++i) {
    tfmrt::Tensor t(DType::F32, {B, S, kModel});
    for (int64_t e = 0; e < t.numel(); ++e) t.data<float>()[e] = dist(rng);
    in.push_back(std::move(t));
  }
  tfmrt::Tensor keep(DType::Bool, {B, S});
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = S - (b % 4) * (S / 16);
    for (int64_t j = 0; j < S; ++j) keep.data<uint8_t>()[b * S + j] = j < len ? 1 : 0;
  }
  in.push_back(std::move(keep));
  return in;
}

enum class Variant { Fused, FusedBf16, Unfused };

void attention(benchmark::State &state, Variant variant, int64_t B, int64_t S) {
  const bool fused = variant != Variant::Unfused;
  tfmrt::Artifact artifact = fused ? fusedArtifact(B, S, variant == Variant::FusedBf16) : unfusedArtifact(B, S);

  tfmrt::RuntimeOptions options;
  options.backend = tfmrt::KernelBackend::Dnnl;
  options.num_threads = benchThreads();
  std::unique_ptr<tfmrt::Model> model;
  tfmrt::Status status = tfmrt::Model::fromArtifact(std::move(artifact), options, model);
  if (!status.ok()) {
    state.SkipWithError(status.message().c_str());
    return;
  }
  const std::vector<tfmrt::Tensor> inputs = makeInputs(B, S);
  std::vector<tfmrt::Tensor> outputs;
  status = model->run("forward", inputs, outputs);  // plans shapes, allocates the arena, creates primitives
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
  state.SetLabel(fused ? model->kernelName("forward", 0) : "primitive chain");
  state.counters["tokens/s"] = benchmark::Counter(double(B * S), benchmark::Counter::kIsIterationInvariantRate);
  // What run() allocated for these shapes: the arena of intermediates + kernel scratch.
  state.counters["peak_bytes"] = benchmark::Counter(double(model->lastMemoryPlan("forward").peakBytes()),
                                                    benchmark::Counter::kDefaults,
                                                    benchmark::Counter::kIs1024);
  state.counters["threads"] = options.num_threads;
}

void registerAll() {
  for (int64_t B : {1, 32})
    for (int64_t S : {16, 64, 256, 1024, 2048})
      for (Variant variant : {Variant::Fused, Variant::FusedBf16, Variant::Unfused}) {  // side by side
        if (variant == Variant::Unfused && B * kHeads * S * S * 4 > (int64_t(2) << 30)) continue;  // > 2 GB of scores
        const char *kind = variant == Variant::Fused ? "fused" : variant == Variant::FusedBf16 ? "fused_bf16" : "unfused";
        const std::string name =
            std::string("Attention/") + kind + "/B" + std::to_string(B) + "/S" + std::to_string(S);
        auto *b = benchmark::RegisterBenchmark(name.c_str(), attention, variant, B, S);
        b->Unit(benchmark::kMillisecond)->UseRealTime();
        if (B * S * S >= 32 * 1024 * 1024) b->MinTime(2.0);  // ~1 s per unfused call: a few iterations
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
