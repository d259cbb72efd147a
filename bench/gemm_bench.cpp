// The decoder's per-step products, few rows against packed weights: tfmc's panel GEMM
// (RuntimeOptions::few_rows_gemm, the default) vs oneDNN 2.6's run-time-M gemm (few_rows_gemm =
// false), through tfmrt::Model::run on one-node artifacts, 2 threads (GEMM_BENCH_THREADS=N: N;
// fma_peak stays at 2).
//
// Shapes: M = rows (hypotheses per decoder step: 1, 8, 32, 128, 256), (K, N) of the small spec's
// decoder: merged QKV 256 -> 768, out projections 256 -> 256, FFN 256 -> 1024 (relu) and
// 1024 -> 256, vocabulary projection 256 -> 8000 (tfm.matmul, transposed table); base's FFN
// 512 -> 2048 and vocabulary 512 -> 32000. Counters: GFLOP/s (2MNK per call).
// decoder_step/M: the 19 GEMMs of one small-spec decode step in sequence (per layer: QKV, self
// output, cross query, cross output, FFN in, FFN out; then the vocabulary), so 19 MB of weights
// cycle through the caches as in translation, unlike the single-shape rows whose one weight stays
// hot. encoder_block/M: the 15 GEMMs of the small spec's `encode` (per layer: QKV, output, FFN in,
// FFN out; then every decoder layer's cross K/V projection) over M source positions.
// These two give bench/decode_ratios.py the rates of a cached translation's GEMMs on their own.
// fma_peak: independent AVX-512 (else AVX2) FMAs on 2 threads, no memory: the arithmetic ceiling.
// panel_bf16 rows: the same products compiled for bf16 (weight_layout packed_bf16); decoder_step/int8
// for int8 (packed_int8: GFLOP/s counts its int8 multiply-adds x 2).
// weight_grad_NxK rows: training's weight gradients, tfmc's AVX2 kernel vs oneDNN (see below).
// Compare the "panel" and "onednn" rows of one run only (machine noise: see README).
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_builder.h"
#include "tfmrt/runtime.h"
#include "tfmrt/tensor.h"

namespace {

using tfmrt::AttrValue;
using tfmrt::DType;

struct GemmShape {
  const char *name;
  int64_t k, n;
  bool linear;  // tfm.linear (bias; relu for FFN-in) vs tfm.matmul with a transposed table
  bool relu;
};

const GemmShape kShapes[] = {
    {"qkv_256x768", 256, 768, true, false},        {"proj_256x256", 256, 256, true, false},
    {"ffn_in_256x1024", 256, 1024, true, true},    {"ffn_out_1024x256", 1024, 256, true, false},
    {"vocab_256x8000", 256, 8000, false, false},   {"base_ffn_in_512x2048", 512, 2048, true, true},
    {"base_vocab_512x32000", 512, 32000, false, false},
};

tfmrt::Tensor randomTensor(std::vector<int64_t> shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
  tfmrt::Tensor t(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// Threads of every GEMM row: 2, or GEMM_BENCH_THREADS (1 shows what the second thread adds).
int benchThreads() { return bench::threadsFromEnv("GEMM_BENCH_THREADS", 2); }

// Loads the artifact on benchThreads() threads with the panel GEMM on or off, sets the weights and runs once
// (the first call packs the weights); null after reporting the error to the benchmark.
// `noAmx`: the kernels are prepared under ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16, so the bf16 panels
// run on the AVX512-BF16 body and the int8 ones on the VNNI body on an AMX CPU (restored after;
// oneDNN itself reads the variable once, at its first primitive, which an earlier row has made).
std::unique_ptr<tfmrt::Model> loadAndWarm(benchmark::State &state, const tfmrt::Artifact &artifact,
                                          const std::map<std::string, tfmrt::Tensor> &weights, bool panel,
                                          const std::vector<tfmrt::Tensor> &in, std::vector<tfmrt::Tensor> &out,
                                          bool noAmx = false) {
  tfmrt::RuntimeOptions options;
  options.num_threads = benchThreads();
  options.few_rows_gemm = panel;
  std::unique_ptr<tfmrt::Model> model;
  const char *cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  const std::string savedCap = cap ? cap : "";
  if (noAmx) setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16", 1);
  tfmrt::Status st = tfmrt::Model::fromArtifact(artifact, options, model);
  if (noAmx) {
    if (cap) setenv("ONEDNN_MAX_CPU_ISA", savedCap.c_str(), 1);
    else unsetenv("ONEDNN_MAX_CPU_ISA");
  }
  if (st.ok()) st = model->setWeights(weights);
  if (st.ok()) st = model->run("forward", in, out);
  if (st.ok()) return model;
  state.SkipWithError(st.message().c_str());
  return nullptr;
}

void runGemm(benchmark::State &state, const GemmShape &s, bool panel, const char *layout) {
  const int64_t m = state.range(0);
  bench::Builder f("gemm", "gemm_bench");
  const uint32_t x = f.input("x", DType::F32, {-1, s.k});
  std::map<std::string, AttrValue> attrs{{"weight_layout", AttrValue::ofString(layout)}};
  uint32_t y;
  std::map<std::string, tfmrt::Tensor> weights{{"w", randomTensor({s.n, s.k}, 1)}};
  if (s.linear) {
    if (s.relu) attrs["activation"] = AttrValue::ofString("relu");
    weights["b"] = randomTensor({s.n}, 2);
    y = f.op("tfm.linear", {x, f.param("w", {s.n, s.k}), f.param("b", {s.n})}, {-1, s.n}, attrs);
  } else {
    attrs["transpose_b"] = AttrValue::ofInt(1);
    y = f.op("tfm.matmul", {x, f.param("w", {s.n, s.k})}, {-1, s.n}, attrs);
  }
  std::vector<tfmrt::Tensor> in{randomTensor({m, s.k}, 3)}, out;
  auto model = loadAndWarm(state, f.finish(y), weights, panel, in, out);
  if (!model) return;
  tfmrt::Status st;
  for (auto _ : state) {
    st = model->run("forward", in, out);
    if (!st.ok()) {
      state.SkipWithError(st.message().c_str());
      return;
    }
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(m) * double(s.k) * double(s.n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Builds chains of tfm.linear (bias, optional residual) with random weights, for the sequence
// benchmarks below.
struct LinearGraph {
  LinearGraph(bench::Builder &builder, const char *layout)
      : f(builder), packed{{"weight_layout", AttrValue::ofString(layout)}}, relu(packed) {
    relu["activation"] = AttrValue::ofString("relu");
  }
  uint32_t param(const std::string &name, std::vector<int64_t> shape) {
    weights[name] = randomTensor(shape, weights.size() + 1);
    return f.param(name, shape);
  }
  uint32_t linear(uint32_t x, int64_t n, int64_t k, const std::string &name, const std::map<std::string, AttrValue> &a,
                  int residual = -1) {
    std::vector<uint32_t> in{x, param(name + ".w", {n, k}), param(name + ".b", {n})};
    if (residual >= 0) in.push_back(uint32_t(residual));
    return f.op("tfm.linear", in, {-1, n}, a);
  }
  // Runs the graph ending in `y` on m x d random rows and reports `flops` per call as GFLOP/s.
  void time(benchmark::State &state, uint32_t y, bool panel, int64_t m, int64_t d, double flops, bool noAmx = false) {
    std::vector<tfmrt::Tensor> in{randomTensor({m, d}, 3)}, out;
    auto model = loadAndWarm(state, f.finish(y), weights, panel, in, out, noAmx);
    if (!model) return;
    for (auto _ : state)
      if (!model->run("forward", in, out).ok()) state.SkipWithError("run failed");
    state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  }
  bench::Builder &f;
  std::map<std::string, tfmrt::Tensor> weights;
  std::map<std::string, AttrValue> packed, relu;
};

void runDecoderStep(benchmark::State &state, bool panel, const char *layout, bool noAmx = false) {
  const int64_t m = state.range(0), d = 256, ff = 1024, vocab = 8000;
  bench::Builder f("decoder_step", "gemm_bench");
  LinearGraph g(f, layout);
  const auto &packed = g.packed, &relu = g.relu;
  uint32_t h = f.input("x", DType::F32, {-1, d});
  for (int l = 0; l < 3; ++l) {
    const std::string p = "layer" + std::to_string(l);
    const uint32_t qkv = g.linear(h, 3 * d, d, p + ".qkv", packed);
    const uint32_t q = f.op("tfm.slice_last", {qkv}, {-1, d}, {{"offset", AttrValue::ofInt(0)}, {"size", AttrValue::ofInt(d)}});
    const uint32_t h1 = g.linear(q, d, d, p + ".self_out", packed, int(h));
    const uint32_t c = g.linear(h1, d, d, p + ".cross_q", packed);
    const uint32_t h2 = g.linear(c, d, d, p + ".cross_out", packed, int(h1));
    h = g.linear(g.linear(h2, ff, d, p + ".ffn_in", relu), d, ff, p + ".ffn_out", packed, int(h2));
  }
  auto tb = packed;
  tb["transpose_b"] = AttrValue::ofInt(1);
  const uint32_t y = f.op("tfm.matmul", {h, g.param("embedding", {vocab, d})}, {-1, vocab}, tb);
  g.time(state, y, panel, m, d, 2.0 * double(m) * (3.0 * (3 * d * d + 3 * d * d + 2 * d * ff) + double(d) * vocab), noAmx);
}

void runEncoderBlock(benchmark::State &state) {
  const int64_t m = state.range(0), d = 256, ff = 1024, layers = 3;
  bench::Builder f("encoder_block", "gemm_bench");
  LinearGraph g(f, "packed");
  const auto &packed = g.packed, &relu = g.relu;
  uint32_t h = f.input("x", DType::F32, {-1, d});
  for (int l = 0; l < layers; ++l) {
    const std::string p = "layer" + std::to_string(l);
    const uint32_t qkv = g.linear(h, 3 * d, d, p + ".qkv", packed);
    const uint32_t q = f.op("tfm.slice_last", {qkv}, {-1, d}, {{"offset", AttrValue::ofInt(0)}, {"size", AttrValue::ofInt(d)}});
    const uint32_t h1 = g.linear(q, d, d, p + ".out", packed, int(h));
    h = g.linear(g.linear(h1, ff, d, p + ".ffn_in", relu), d, ff, p + ".ffn_out", packed, int(h1));
  }
  // The cross K/V projections read the memory; summed into one result so every one is live.
  uint32_t y = g.linear(h, 2 * d, d, "cross0", packed);
  for (int l = 1; l < layers; ++l) y = g.linear(h, 2 * d, d, "cross" + std::to_string(l), packed, int(y));
  g.time(state, y, true, m, d, 2.0 * double(m) * double(layers) * (4.0 * d * d + 2.0 * d * ff + 2.0 * d * d));
}

// 12 independent accumulators per thread (two FMA pipes x four cycles of latency, with room).
__attribute__((target("avx512f"))) float fmaLoop(int64_t iterations, float seed) {
  __m512 acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = _mm512_set1_ps(seed * float(j));
  const __m512 b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-4f);
  for (int64_t i = 0; i < iterations; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) acc[j] = _mm512_fmadd_ps(acc[j], b, c);
  __m512 sum = acc[0];
  for (int j = 1; j < 12; ++j) sum = _mm512_add_ps(sum, acc[j]);
  return _mm512_reduce_add_ps(sum);
}

// The same on 8 lanes, for CPUs without AVX-512.
__attribute__((target("avx2,fma"))) float fmaLoopAvx2(int64_t iterations, float seed) {
  __m256 acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = _mm256_set1_ps(seed * float(j));
  const __m256 b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-4f);
  for (int64_t i = 0; i < iterations; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) acc[j] = _mm256_fmadd_ps(acc[j], b, c);
  float sum = 0;
  alignas(32) float lanes[8];
  for (int j = 0; j < 12; ++j) {
    _mm256_store_ps(lanes, acc[j]);
    for (float x : lanes) sum += x;
  }
  return sum;
}

void runFmaPeak(benchmark::State &state) {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    state.SkipWithError("neither AVX-512 nor AVX2 with FMA on this CPU");
    return;
  }
  const int64_t iterations = 1 << 22;
  auto loop = avx512 ? fmaLoop : fmaLoopAvx2;
  float sinks[2] = {0, 0};
  for (auto _ : state) {
    std::thread other([&] { sinks[1] += loop(iterations, 2e-3f); });
    sinks[0] += loop(iterations, 1e-3f);
    other.join();
  }
  benchmark::DoNotOptimize(sinks[0] + sinks[1]);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * 2 * double(iterations) * 12 * (avx512 ? 16 : 8) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// Weight gradients dW [N, K] = dy^T x over R = 3000 rows (a small-spec batch's tokens): tfmc's
// blocked AVX2 kernel (fast_weight_grad, AVX2 CPUs without AVX-512) vs oneDNN's gemm:jit with dy
// read transposed. Shapes of the small spec's linears and its tied vocabulary projection.
void runWeightGrad(benchmark::State &state, int64_t n, int64_t k, bool fast) {
  const int64_t r = state.range(0);
  bench::Builder f("weight_grad", "gemm_bench");
  const uint32_t dy = f.input("dy", DType::F32, {-1, n}), x = f.input("x", DType::F32, {-1, k});
  const uint32_t dw = f.op("tfm.weight_grad", {dy, x}, {n, k}, {});
  tfmrt::RuntimeOptions options;
  options.num_threads = benchThreads();
  options.fast_weight_grad = fast;
  std::unique_ptr<tfmrt::Model> model;
  tfmrt::Status st = tfmrt::Model::fromArtifact(f.finish(dw), options, model);
  std::vector<tfmrt::Tensor> in{randomTensor({r, n}, 1), randomTensor({r, k}, 2)}, out;
  if (st.ok()) st = model->run("forward", in, out);
  if (!st.ok()) {
    state.SkipWithError(st.message().c_str());
    return;
  }
  for (auto _ : state)
    if (!model->run("forward", in, out).ok()) state.SkipWithError("run failed");
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(r) * double(n) * double(k) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

const int kRegistered = [] {
  // panel_bf16: weight_layout packed_bf16 (tfmc compile --precision=bf16), the bf16 panel GEMM
  // (on AMX CPUs its AMX body; panel_bf16_no_amx: its AVX512-BF16 body there).
  // onednn_bf16: oneDNN's run-time-M bf16 gemm for every M (few_rows_gemm = false).
  // int8: weight_layout packed_int8 (tfmc compile --precision=int8), the VNNI int8 kernel (on AMX
  // tiles on AMX CPUs; int8_no_amx: on VNNI there; the f32
  // GEMM on CPUs without AVX512-VNNI).
  const char *stepNames[] = {"decoder_step/panel", "decoder_step/onednn", "decoder_step/panel_bf16", "decoder_step/onednn_bf16",
                             "decoder_step/int8", "decoder_step/panel_bf16_no_amx", "decoder_step/int8_no_amx"};
  for (int variant = 0; variant < 7; ++variant)
    benchmark::RegisterBenchmark(stepNames[variant],
                                 [variant](benchmark::State &st) {
                                   runDecoderStep(st, variant % 2 == 0 || variant >= 5,
                                                  variant == 4 || variant == 6 ? "packed_int8"
                                                  : variant >= 2               ? "packed_bf16"
                                                                               : "packed",
                                                  variant >= 5);
                                 })
        ->ArgName("M")
        ->Arg(1)
        ->Arg(8)
        ->Arg(32)
        ->Arg(115)
        ->Arg(128)
        ->Arg(256)
        ->Arg(512)
        ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("encoder_block/panel", runEncoderBlock)->ArgName("M")->Arg(1024)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("fma_peak", runFmaPeak)->Unit(benchmark::kMicrosecond)->UseRealTime();
  for (const GemmShape &s : kShapes)
    for (int variant = 0; variant < 4; ++variant)
      benchmark::RegisterBenchmark(
          (std::string(s.name) + (variant == 0 ? "/panel" : variant == 1 ? "/onednn" : variant == 2 ? "/panel_bf16" : "/onednn_bf16")).c_str(),
          [&s, variant](benchmark::State &st) { runGemm(st, s, variant % 2 == 0, variant >= 2 ? "packed_bf16" : "packed"); })
          ->ArgName("M")
          ->Arg(1)
          ->Arg(8)
          ->Arg(32)
          ->Arg(128)
          ->Arg(256)
          ->Arg(1024)
          ->Arg(2048)
          ->Unit(benchmark::kMicrosecond);
  const int64_t gradShapes[][2] = {{768, 256}, {256, 256}, {1024, 256}, {256, 1024}, {8000, 256}};
  for (const auto &s : gradShapes)
    for (bool fast : {true, false})
      benchmark::RegisterBenchmark(("weight_grad_" + std::to_string(s[0]) + "x" + std::to_string(s[1]) +
                                    (fast ? "/fast" : "/onednn"))
                                       .c_str(),
                                   [s, fast](benchmark::State &st) { runWeightGrad(st, s[0], s[1], fast); })
          ->ArgName("R")
          ->Arg(3000)
          ->Unit(benchmark::kMillisecond);
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
