// The decoder's per-step products, few rows against packed weights: tfmc's panel GEMM
// (RuntimeOptions::few_rows_gemm, the default) vs oneDNN 2.6's run-time-M gemm (few_rows_gemm =
// false), through tfmrt::Model::run on one-node artifacts, 2 threads.
//
// Shapes: M = rows (hypotheses per decoder step: 1, 8, 32, 128, 256), (K, N) of the small spec's
// decoder: merged QKV 256 -> 768, out projections 256 -> 256, FFN 256 -> 1024 (relu) and
// 1024 -> 256, vocabulary projection 256 -> 8000 (tfm.matmul, transposed table); base's FFN
// 512 -> 2048 and vocabulary 512 -> 32000. Counters: GFLOP/s (2MNK per call).
// Compare the "panel" and "onednn" rows of one run only (machine noise: see README).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
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

void runGemm(benchmark::State &state, const GemmShape &s, bool panel) {
  const int64_t m = state.range(0);
  bench::Builder f("gemm", "gemm_bench");
  const uint32_t x = f.input("x", DType::F32, {-1, s.k});
  std::map<std::string, AttrValue> attrs{{"weight_layout", AttrValue::ofString("packed")}};
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
  tfmrt::RuntimeOptions options;
  options.num_threads = 2;
  options.few_rows_gemm = panel;
  std::unique_ptr<tfmrt::Model> model;
  tfmrt::Status st = tfmrt::Model::fromArtifact(f.finish(y), options, model);
  if (st.ok()) st = model->setWeights(weights);
  if (!st.ok()) {
    state.SkipWithError(st.message().c_str());
    return;
  }
  std::vector<tfmrt::Tensor> in{randomTensor({m, s.k}, 3)}, out;
  st = model->run("forward", in, out);  // the first call packs the weight
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

const int kRegistered = [] {
  for (const GemmShape &s : kShapes)
    for (bool panel : {true, false})
      benchmark::RegisterBenchmark((std::string(s.name) + (panel ? "/panel" : "/onednn")).c_str(),
                                   [&s, panel](benchmark::State &st) { runGemm(st, s, panel); })
          ->ArgName("M")
          ->Arg(1)
          ->Arg(8)
          ->Arg(32)
          ->Arg(128)
          ->Arg(256)
          ->Unit(benchmark::kMicrosecond);
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
