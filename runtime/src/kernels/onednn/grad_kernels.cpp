// Gradient ops on the Dnnl backend (tfm-autodiff's output), each tested against its reference
// kernel (tests/unit/runtime/grad_kernels_test.cpp):
//   dnnl.weight_grad          dW [N, K] = dy^T x as one oneDNN matmul: dy [R, N] read through the
//                             transposed tag `ba`, all dims run-time (one primitive for any R);
//                             precision "bf16" on an AVX512-BF16 CPU: both operands rounded to
//                             bf16 per call, f32 result (gemm:jit's bf16 kernel, ~2x the f32 rate);
//                             f32 on an AVX2 CPU without AVX-512: our blocked body instead
//                             (fast.weight_grad_avx2, kernels/gemm/weight_grad.h), dW rows split
//                             over the threads
//   fast.bias_grad            column sums, rows split over threads, partial sums merged
//   fast.relu_grad            vectorised select
//   fast.label_smoothed_xent_grad  (softmax(z) - q) / N per row with the vectorised exp
//   fast.embedding_grad       zeroed table + scatter-add of dy rows, columns split over threads
//                             (no two threads touch one element, so no atomics)
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "format.h"
#include "kernels/attention/attention.h"
#include "kernels/gemm/packed_gemm.h"
#include "kernels/gemm/weight_grad.h"
#include "kernels/onednn/onednn_util.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/xent_common.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

using namespace dnnl_names;

constexpr int64_t kFastWeightGradMaxRows = 2048;  // of dW

class DnnlWeightGradKernel final : public Kernel {
public:
  const char *name() const override {
    return bf16_ ? "dnnl.weight_grad.bf16" : avx2_ ? "fast.weight_grad_avx2" : "dnnl.weight_grad";
  }
  Status prepare(const KernelPrepareInfo &info) override {
    ctx_ = cpuDevice(info.device);
    if (!ctx_) return internalError("dnnl.weight_grad needs the CPU device");
    bf16_ = attrString(*info.node, "precision") == "bf16" && gemm::cpuHasAvx512Bf16();
    // AVX-512 CPUs keep oneDNN (not measured against it there).
    avx2_ = info.fastWeightGrad && !bf16_ && !attention::cpuHasAvx512() && attention::cpuHasAvx2Fma();
    const memory::data_type operands = bf16_ ? kBf16 : kF32;
    try {
      memory::desc srcMd({kRT, kRT}, operands, tag::ba);  // dy^T: [N, R] over dy's [R, N] storage
      memory::desc wMd({kRT, kRT}, operands, tag::ab);    // x [R, K]
      memory::desc dstMd({kRT, kRT}, kF32, tag::ab);  // dW [N, K]
      auto pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(srcMd, wMd, dstMd), dnnlUserScratchpad(), ctx_->engine);
      prim_ = dnnl::matmul(pd);
      scratchpad_ = pd.scratchpad_desc();
    } catch (const dnnl::error &e) {
      return dnnlError("weight_grad primitive creation", e);
    }
    return Status::OK();
  }
  size_t scratchBytes(const std::vector<const std::vector<int64_t> *> &, int) const override {
    return scratchpad_.get_size();
  }
  Status run(const KernelArgs &a) const override {
    const TensorRef &dy = a.inputs[0], &x = a.inputs[1], &dw = a.outputs[0];
    const int64_t n = dy.dim(-1), k = x.dim(-1), r = rowsOf(dy);
    if (n == 0 || k == 0) return Status::OK();
    if (r == 0) {  // no positions: the sum is empty
      std::memset(dw.data, 0, size_t(n * k) * sizeof(float));
      return Status::OK();
    }
    // The vocabulary's gradient (N = 8000 x K = 256, R = 3000) ran slower on ours (87 vs 100
    // GFLOP/s, bench/gemm_bench weight_grad_*); the layers' shapes faster or level (1024 x 256:
    // 99 vs 60, 256 x 1024: 78 vs 66, 768 / 256 x 256: level).
    if (avx2_ && n <= kFastWeightGradMaxRows) {
      const float *dyp = dy.as<float>(), *xp = x.as<float>();
      float *dwp = dw.as<float>();
      const int64_t blocks = (n + 5) / 6;  // of 6 dW rows: one thread's rows are whole blocks
#pragma omp parallel if (r * n * k >= kParallelMinElements * 8)
      {
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t n0 = std::min(n, blocks * t / nt * 6), n1 = std::min(n, blocks * (t + 1) / nt * 6);
        if (n0 < n1) gemm::weightGradRowsAvx2(dyp, xp, r, n, k, n0, n1, dwp);
      }
      return Status::OK();
    }
    try {
      const void *dyData = dy.data, *xData = x.data;
      // The bf16 operands, per calling thread (grown once): sessions may run this kernel at once.
      thread_local std::vector<uint16_t> dyBf16, xBf16;
      if (bf16_) {
        dyBf16.resize(size_t(r * n));
        xBf16.resize(size_t(r * k));
        gemm::toBf16(dy.as<float>(), r * n, dyBf16.data());
        gemm::toBf16(x.as<float>(), r * k, xBf16.data());
        dyData = dyBf16.data();
        xData = xBf16.data();
      }
      const memory::data_type operands = bf16_ ? kBf16 : kF32;
      memory dyMem({{n, r}, operands, tag::ba}, ctx_->engine, const_cast<void *>(dyData));
      memory xMem({{r, k}, operands, tag::ab}, ctx_->engine, const_cast<void *>(xData));
      memory dwMem({{n, k}, kF32, tag::ab}, ctx_->engine, dw.data);
      dnnlRun(*ctx_, prim_, {{DNNL_ARG_SRC, dyMem.get()}, {DNNL_ARG_WEIGHTS, xMem.get()}, {DNNL_ARG_DST, dwMem.get()}},
              scratchpad_, a.scratch);
    } catch (const dnnl::error &e) {
      return dnnlError("weight_grad", e);
    }
    return Status::OK();
  }

private:
  CpuDevice *ctx_ = nullptr;
  bool bf16_ = false, avx2_ = false;
  dnnl::matmul prim_;
  memory::desc scratchpad_;  // prim_'s (user-managed: see CpuDevice)
};

TFMRT_SIMD_CLONES void addRowsInto(const float *x, int64_t rows, int64_t n, float *acc) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * n;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) acc[j] += xr[j];
  }
}

class FastBiasGradKernel final : public Kernel {
public:
  const char *name() const override { return "fast.bias_grad"; }
  Status run(const KernelArgs &a) const override {
    const float *dy = a.inputs[0].as<float>();
    float *out = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].dim(-1), rows = rowsOf(a.inputs[0]);
    std::memset(out, 0, size_t(n) * sizeof(float));
    if (rows == 0 || n == 0) return Status::OK();
    int threads = rows * n >= kParallelMinElements ? omp_get_max_threads() : 1;
    if (size_t(threads) * size_t(n) * sizeof(float) > a.scratchBytes) threads = 1;  // planned for fewer threads
    if (threads == 1) {
      addRowsInto(dy, rows, n, out);
      return Status::OK();
    }
    // One partial row per thread of the team actually granted (it may be smaller than asked
    // for: nested regions, OMP_DYNAMIC, thread limits) in the caller's scratch, then a merge.
    float *partial = static_cast<float *>(a.scratch);
    int team = 1;
#pragma omp parallel num_threads(threads)
    {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      if (t == 0) team = int(nt);
      const int64_t begin = rows * t / nt, end = rows * (t + 1) / nt;
      float *acc = partial + t * n;
      std::memset(acc, 0, size_t(n) * sizeof(float));
      addRowsInto(dy + begin * n, end - begin, n, acc);
    }
    addRowsInto(partial, team, n, out);
    return Status::OK();
  }
  size_t scratchBytes(const std::vector<const std::vector<int64_t> *> &in, int threads) const override {
    return size_t(in[0]->back()) * size_t(threads) * sizeof(float);
  }
};

TFMRT_SIMD_CLONES void reluGradSpan(const float *x, const float *dy, float *dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

class FastReluGradKernel final : public Kernel {
public:
  const char *name() const override { return "fast.relu_grad"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>(), *dy = a.inputs[1].as<float>();
    float *dx = a.outputs[0].as<float>();
    fast::parallelSpans(a.inputs[0].numel(), kParallelMinElements,
                        [&](int64_t i, int64_t e) { reluGradSpan(x + i, dy + i, dx + i, e - i); });
    return Status::OK();
  }
};

// g[v] = (exp(z[v] - max) / sumExp - e / V) * inv, then g[target] -= (1 - e) * inv.
TFMRT_SIMD_CLONES void xentGradRow(const float *z, float *g, int64_t n, float smoothOverV, float inv) {
  const float mx = fast::rowMax(z, n);
  double sumExp = 0.0;
  for (int64_t begin = 0; begin < n; begin += 4096) {  // short float partial sums, added in double
    const int64_t end = std::min(n, begin + 4096);
    float e = 0.0f;
#pragma omp simd reduction(+ : e)
    for (int64_t v = begin; v < end; ++v) {
      const float p = fast::expApprox(z[v] - mx);
      g[v] = p;
      e += p;
    }
    sumExp += e;
  }
  const float scale = float(1.0 / sumExp) * inv, shift = smoothOverV * inv;
#pragma omp simd
  for (int64_t v = 0; v < n; ++v) g[v] = g[v] * scale - shift;
}

class FastXentGradKernel final : public xent::KernelBase {
public:
  const char *name() const override { return "fast.label_smoothed_xent_grad"; }
  Status run(const KernelArgs &a) const override {
    const float *logits = a.inputs[0].as<float>();
    const int32_t *targets = a.inputs[1].as<int32_t>();
    float *dz = a.outputs[0].as<float>();
    const int64_t V = a.inputs[0].dim(-1), positions = a.inputs[1].numel();
    TFMRT_RETURN_IF_ERROR(xent::checkTargets(targets, positions, padId_, V, *a.inputs[1].shape));
    const int64_t count = xent::countTargets(targets, positions, padId_);
    const float inv = count ? float(1.0 / double(count)) : 0.0f;
    const float smoothOverV = float(smoothing_ / double(V)), hit = float(1.0 - smoothing_) * inv;
#pragma omp parallel for schedule(static) if (positions * V >= kParallelMinElements)
    for (int64_t p = 0; p < positions; ++p) {
      float *g = dz + p * V;
      if (targets[p] == padId_) {
        std::memset(g, 0, size_t(V) * sizeof(float));
        continue;
      }
      xentGradRow(logits + p * V, g, V, smoothOverV, inv);
      g[targets[p]] -= hit;
    }
    return Status::OK();
  }
};

TFMRT_SIMD_CLONES void addColumns(const float *src, float *dst, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dst[j] += src[j];
}

class FastEmbeddingGradKernel final : public Kernel {
public:
  const char *name() const override { return "fast.embedding_grad"; }
  Status run(const KernelArgs &a) const override {
    const int32_t *ids = a.inputs[0].as<int32_t>();
    const float *dy = a.inputs[1].as<float>();
    float *table = a.outputs[0].as<float>();
    const int64_t V = a.outputs[0].dim(0), D = a.outputs[0].dim(1), positions = a.inputs[0].numel();
    for (int64_t p = 0; p < positions; ++p)
      if (ids[p] < 0 || ids[p] >= V)
        return invalidArgument(cat("token id ", ids[p], " at flat position ", p, " of ids ", shapeStr(*a.inputs[0].shape),
                                   " is outside the table's ", V, " rows"));
    fast::parallelSpans(V * D, kParallelMinElements,
                        [&](int64_t i, int64_t e) { std::memset(table + i, 0, size_t(e - i) * sizeof(float)); });
    // Columns [c0, c1) of every row belong to one thread; rows are added in position order, so
    // the result does not depend on the thread count.
    const bool parallel = positions * D >= kParallelMinElements && omp_get_max_threads() > 1;
#pragma omp parallel if (parallel)
    {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t c0 = (D * t / nt) / 16 * 16, c1 = t + 1 == nt ? D : (D * (t + 1) / nt) / 16 * 16;
      if (c0 < c1)
        for (int64_t p = 0; p < positions; ++p) addColumns(dy + p * D + c0, table + int64_t(ids[p]) * D + c0, c1 - c0);
    }
    return Status::OK();
  }
};

}  // namespace

void registerDnnlGrad(KernelRegistry &r) {
  r.add({"tfm.embedding_grad", DType::I32, Layout::Plain, KernelBackend::Dnnl}, makeKernel<FastEmbeddingGradKernel>);
  r.add(dnnlKey("tfm.weight_grad"), makeKernel<DnnlWeightGradKernel>);
  r.add(dnnlKey("tfm.bias_grad"), makeKernel<FastBiasGradKernel>);
  r.add(dnnlKey("tfm.relu_grad"), makeKernel<FastReluGradKernel>);
  r.add(dnnlKey("tfm.label_smoothed_xent_grad"), makeKernel<FastXentGradKernel>);
}

}  // namespace tfmrt
