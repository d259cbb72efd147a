// `tfmc bench`: the fused and the unfused build of one spec, side by side in one run, with the
// same weights and inputs. Rounds alternate between the builds so machine noise hits both;
// the table reports medians, their ratio, GFLOP/s and peak activation memory, plus the load
// average (these machines are shared: only same-run ratios mean anything).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "CompilerCommands.h"
#include "Pipeline.h"
#include "RunSupport.h"
#include "SampleIds.h"
#include "spec/FlopCount.h"
#include "tfmrt/runtime.h"

namespace tfmc {
namespace {

struct Variant {
  std::string fusion;
  bool bf16 = false, int8 = false;
  std::string label;
  std::unique_ptr<tfmrt::Model> model;
  tfmrt::MemoryPlanSummary memory;
  std::vector<double> millis;
  std::vector<tfmrt::Tensor> outputs;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The machine's matmul rate as our runtime sees it: one 2048^3 tfm.matmul with a packed
// [N, K] weight (the kernel the model's GEMMs use), median of `reps`, in GFLOP/s.
double measureGemmPeak(const tfmrt::RuntimeOptions &options, int reps) {
  const int64_t n = 2048;
  tfmrt::Artifact a;
  a.modelName = "gemm-peak";
  tfmrt::ParamInfo w;
  w.name = "w";
  w.shape = {n, n};
  a.params.push_back(w);
  tfmrt::EntryFunction fn;
  fn.name = "forward";
  auto value = [&](std::string name, tfmrt::ValueKind kind, std::vector<int64_t> shape) {
    tfmrt::ValueInfo v;
    v.name = std::move(name);
    v.kind = kind;
    v.shape = std::move(shape);
    fn.values.push_back(v);
    return uint32_t(fn.values.size() - 1);
  };
  uint32_t x = value("x", tfmrt::ValueKind::Input, {tfmrt::kDynamicDim, n});
  uint32_t wv = value("w", tfmrt::ValueKind::Parameter, {n, n});
  uint32_t y = value("%y", tfmrt::ValueKind::Intermediate, {tfmrt::kDynamicDim, n});
  tfmrt::Node node;
  node.op = "tfm.matmul";
  node.inputs = {x, wv};
  node.outputs = {y};
  node.attrs["transpose_b"] = tfmrt::AttrValue::ofInt(1);
  node.attrs["weight_layout"] = tfmrt::AttrValue::ofString("packed");
  fn.nodes.push_back(node);
  fn.inputs = {x};
  fn.outputs = {y};
  a.functions.push_back(fn);
  std::unique_ptr<tfmrt::Model> model;
  if (!tfmrt::Model::fromArtifact(std::move(a), options, model).ok() || !model->initWeights(1).ok())
    return 0;
  std::vector<tfmrt::Tensor> in = {tfmrt::Tensor::f32({n, n}, std::vector<float>(n * n, 0.5f))},
                             out;
  std::vector<double> gflops;
  for (int r = 0; r < reps + 1; ++r) {
    auto start = std::chrono::steady_clock::now();
    if (!model->run("forward", in, out).ok()) return 0;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r) gflops.push_back(2.0 * n * n * n / s / 1e9);  // the first call binds shapes
  }
  return median(gflops);
}

}  // namespace

int benchCommand(const CommandLine &cl) {
  auto unknown = cl.unknown({"batch", "src-len", "tgt-len", "rounds", "iters", "threads", "seed",
                             "peak-gflops", "precision"});
  if (!unknown.empty()) {
    std::cerr << "tfmc bench: error: unknown option --" << unknown[0] << "\n";
    return 2;
  }
  if (cl.positionals.size() != 1) {
    std::cerr << "tfmc bench: error: expected exactly one spec file (tfmc bench <spec.yaml>)\n";
    return 2;
  }
  ModelSpec spec;
  std::vector<SpecDiagnostic> diags;
  if (!parseModelSpecFile(cl.positionals[0], spec, diags)) {
    for (const auto &d : diags) std::cerr << d.render();
    return 1;
  }
  const int64_t batch = cl.getInt("batch", spec.compile.batch);
  const int64_t srcLen = cl.getInt("src-len", spec.compile.src_len);
  const int64_t tgtLen = cl.getInt("tgt-len", spec.compile.tgt_len);
  constexpr int64_t kMaxBatch = int64_t(1) << 20;  // 2^63 - 1 ended in an internal error
  if (batch <= 0 || batch > kMaxBatch || srcLen <= 0 || tgtLen <= 0 || srcLen > spec.model.max_len ||
      tgtLen > spec.model.max_len) {
    std::cerr << "tfmc bench: error: need 0 < batch <= " << kMaxBatch << " and 0 < lengths <= max_len ("
              << spec.model.max_len << "), got batch " << batch << ", src " << srcLen << ", tgt "
              << tgtLen << "\n";
    return 2;
  }
  const int64_t rounds = cl.getInt("rounds", 3), iters = cl.getInt("iters", 3);
  if (rounds < 1 || iters < 1) {  // were raised to 1 silently
    std::cerr << "tfmc bench: error: --rounds and --iters must be >= 1, got " << rounds << " and " << iters << "\n";
    return 2;
  }
  const double peak = cl.getDouble("peak-gflops", 450);
  if (peak < 1) {  // printed "inf%" and negative shares
    std::cerr << "tfmc bench: error: --peak-gflops must be >= 1 (the machine's nominal GFLOP/s), got " << cl.get("peak-gflops") << "\n";
    return 2;
  }

  // Full-length rows (no padding), ids away from the special tokens.
  const uint64_t seed = uint64_t(cl.getInt("seed", 1));
  auto ids = [&](int64_t rows, int64_t cols, int64_t vocab) {
    SampleIds draw(vocab, spec.model.pad_id, spec.model.bos_id, spec.model.eos_id, seed + vocab + cols);
    std::vector<int32_t> v(rows * cols);
    for (auto &x : v) x = draw.next();
    return tfmrt::Tensor::i32({rows, cols}, v);
  };
  std::vector<tfmrt::Tensor> inputs = {ids(batch, srcLen, spec.model.src_vocab_size),
                                       ids(batch, tgtLen, spec.model.tgt_vocab_size),
                                       ids(batch, tgtLen, spec.model.tgt_vocab_size)};

  // Default: the fused against the unfused build (f32). --precision=bf16|int8: the fused build in
  // bf16 (tfm-lower-precision) or int8 (tfm-quantize-int8) against the same build in f32.
  const std::string precision = cl.get("precision", "f32");
  if (precision != "f32" && precision != "bf16" && precision != "int8") {
    std::cerr << "tfmc bench: error: --precision: expected f32, bf16 or int8, got '" << precision << "'\n";
    return 2;
  }
  const bool comparePrecision = precision != "f32";
  std::vector<Variant> variants(2);
  variants[0].fusion = "all";
  variants[0].bf16 = precision == "bf16";
  variants[0].int8 = precision == "int8";
  variants[0].label = comparePrecision ? precision : "fused";
  variants[1].fusion = comparePrecision ? "all" : "none";
  variants[1].label = comparePrecision ? "f32" : "unfused";
  tfmrt::RuntimeOptions runtimeOptions;
  const int64_t threads = cl.getInt("threads", 0);
  if (threads < 0 || threads > tfmrt::kMaxThreads) {
    std::cerr << "tfmc bench: error: --threads must be in [0, " << tfmrt::kMaxThreads << "], got " << threads << "\n";
    return 2;
  }
  runtimeOptions.num_threads = int(threads);
  for (Variant &v : variants) {
    PipelineOptions pipeline;
    std::string error;
    pipeline.parseFusionList(v.fusion, error);
    pipeline.bf16 = v.bf16;
    pipeline.int8 = v.int8;
    mlir::MLIRContext context;
    tfmrt::Artifact artifact;
    if (failed(compileModelSpec(spec, context, artifact, pipeline))) return 1;
    tfmrt::Status s = tfmrt::Model::fromArtifact(std::move(artifact), runtimeOptions, v.model);
    if (s.ok()) s = v.model->initWeights(1);
    if (s.ok()) s = v.model->run("forward", inputs, v.outputs);  // warm-up: binds shapes
    if (!s.ok()) {
      std::cerr << "tfmc bench: error (" << v.label << "): " << s.message() << "\n";
      return 1;
    }
    v.memory = v.model->lastMemoryPlan("forward");  // what run() allocated: arena + kernel scratch
    // As run and translate say it: a bf16 or int8 row measured in f32 (or plain loops) is no
    // measure of that precision.
    if (v.bf16 || v.int8) noticePrecisionFallback("the " + v.label + " build", *v.model, false, "bench");
  }

  const std::string loadBefore = loadAverage();
  std::printf("tfmc bench %s: batch %lld x (src %lld + tgt %lld) tokens, forward + loss, %s\n",
              cl.positionals[0].c_str(), (long long)batch, (long long)srcLen, (long long)tgtLen,
              comparePrecision ? ("fused build, " + precision + " vs f32").c_str() : "f32, fused vs unfused build");
  std::fflush(stdout);
  for (int64_t r = 0; r < rounds; ++r)
    for (Variant &v : variants)
      for (int64_t i = 0; i < iters; ++i) {
        auto start = std::chrono::steady_clock::now();
        tfmrt::Status s = v.model->run("forward", inputs, v.outputs);
        if (!s.ok()) {
          std::cerr << "tfmc bench: error (" << v.label << "): " << s.message() << "\n";
          return 1;
        }
        v.millis.push_back(std::chrono::duration<double, std::milli>(
                               std::chrono::steady_clock::now() - start)
                               .count());
      }

  const double gemmPeak = measureGemmPeak(runtimeOptions, 5);

  // Both builds compute the same function: report how far apart their logits are.
  const tfmrt::Tensor &a = variants[0].outputs[0], &b = variants[1].outputs[0];
  double maxDiff = 0, maxAbs = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    maxDiff = std::max(maxDiff, double(std::abs(a.data<float>()[i] - b.data<float>()[i])));
    maxAbs = std::max(maxAbs, double(std::abs(b.data<float>()[i])));
  }

  const ForwardFlops split = forwardFlopsSplit(spec, batch, srcLen, tgtLen);
  const double flops = split.total();
  const double tokens = double(batch * (srcLen + tgtLen));
  const std::string ofPeak = "of " + std::to_string(int(peak));
  std::printf("%-8s %12s %12s %10s %9s %9s %16s\n", "build", "median ms", "tokens/s", "GFLOP/s",
              ofPeak.c_str(), "of GEMM", "peak MiB");
  for (const Variant &v : variants) {
    double ms = median(v.millis);
    double rate = flops / (ms / 1e3) / 1e9;
    std::printf("%-8s %12.2f %12.0f %10.3g %8.1f%% %8.1f%% %16.3g\n",  // %g: a tiny spec's 0.03 MiB
                v.label.c_str(), ms, tokens / (ms / 1e3), rate,
                100.0 * rate / peak, gemmPeak > 0 ? 100.0 * rate / gemmPeak : 0.0,
                double(v.memory.peakBytes()) / (1 << 20));
  }
  const double speedup = median(variants[1].millis) / median(variants[0].millis);
  std::printf("%s/%s speed-up: %.2fx; peak memory (intermediates + kernel scratch) %s/%s: %.2fx\n",
              variants[0].label.c_str(), variants[1].label.c_str(), speedup, variants[1].label.c_str(),
              variants[0].label.c_str(),
              double(variants[1].memory.peakBytes()) / double(std::max<int64_t>(1, variants[0].memory.peakBytes())));
  // Fusion removes memory traffic and launches, not FLOPs: a build that spent nothing but its
  // projection GEMMs at the measured matmul rate would bound the speed-up fusion can give.
  if (gemmPeak > 0 && !comparePrecision) {
    const double gemmOnlyMs = split.projections / (gemmPeak * 1e9) * 1e3;
    std::printf("bound: projection GEMMs alone (%.1f GFLOP) at the measured %.1f GFLOP/s take %.2f ms, so no "
                "fusion can beat unfused by more than %.2fx here\n",
                split.projections / 1e9, gemmPeak, gemmOnlyMs, median(variants[1].millis) / gemmOnlyMs);
  }
  std::printf("logits max |%s - %s| = %.3g (max |logit| %.3g); %.3g GFLOP per forward "
              "(GEMMs + attention, spec/FlopCount.h)\n"
              "peaks: nominal %.0f GFLOP/s (--peak-gflops); measured 2048^3 tfm.matmul (packed) in "
              "this run %.1f GFLOP/s\n",
              variants[0].label.c_str(), variants[1].label.c_str(), maxDiff, maxAbs, flops / 1e9, peak, gemmPeak);
  std::printf("%lld rounds x %lld iterations per build, alternating; load average before %s, "
              "after %s\n",
              (long long)rounds, (long long)iters, loadBefore.c_str(), loadAverage().c_str());
  return 0;
}

}  // namespace tfmc
