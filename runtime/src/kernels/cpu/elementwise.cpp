// Hand-written elementwise kernels of the Dnnl backend: tfm.scale, tfm.relu, tfm.gelu, tfm.add,
// tfm.bias_add, tfm.mask, tfm.dropout. They exist so the unfused program runs on vectorised, parallel loops
// (AVX-512 clones on this CPU) and fused-vs-unfused comparisons measure the fusion, not a scalar
// erf or an SSE2 loop. Each is tested against its reference kernel.
#include <limits>

#include "format.h"
#include "kernels/fast_kernels.h"
#include "kernels/dropout_mask.h"
#include "kernels/cpu/cpu_util.h"
#include "op_schema.h"

namespace tfmrt {
namespace fast {

TFMRT_SIMD_CLONES void addSpan(const float *a, const float *b, float *y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

TFMRT_SIMD_CLONES void geluSpan(const float *x, float *y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = geluErf(x[i]);
}

void add(const float *a, const float *b, float *y, int64_t n) {
  parallelSpans(n, kParallelMinElements, [&](int64_t i, int64_t e) { addSpan(a + i, b + i, y + i, e - i); });
}

void copy(const void *src, void *dst, size_t bytes) {
  const auto *s = static_cast<const uint8_t *>(src);
  auto *d = static_cast<uint8_t *>(dst);
  parallelSpans(int64_t(bytes), int64_t(kParallelMinElements) * 16,
                [&](int64_t i, int64_t e) { std::memcpy(d + i, s + i, size_t(e - i)); });
}

namespace {

TFMRT_SIMD_CLONES void scaleSpan(const float *x, float *y, int64_t n, float factor) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * factor;
}

TFMRT_SIMD_CLONES void reluSpan(const float *x, float *y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

TFMRT_SIMD_CLONES void biasAddRows(const float *x, const float *bias, float *y, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * n;
    float *yr = y + r * n;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) yr[j] = xr[j] + bias[j];
  }
}

// One score row of tfm.mask: keys j < visible keep their score unless key_keep[j] == 0; keys
// from `visible` on (the causal future) are -inf.
TFMRT_SIMD_CLONES void maskRow(const float *x, const uint8_t *keep, float *y, int64_t visible, int64_t n) {
  const float ninf = -std::numeric_limits<float>::infinity();
#pragma omp simd
  for (int64_t j = 0; j < visible; ++j) y[j] = keep[j] ? x[j] : ninf;
#pragma omp simd
  for (int64_t j = visible; j < n; ++j) y[j] = ninf;
}

class ScaleKernel final : public Kernel {
public:
  const char *name() const override { return "fast.scale"; }
  Status prepare(const KernelPrepareInfo &info) override {
    factor_ = float(attrFloat(*info.node, "factor"));
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    float *y = a.outputs[0].as<float>();
    parallelSpans(a.inputs[0].numel(), kParallelMinElements,
                  [&](int64_t i, int64_t e) { scaleSpan(x + i, y + i, e - i, factor_); });
    return Status::OK();
  }

private:
  float factor_ = 1.0f;
};

class ReluKernel final : public Kernel {
public:
  const char *name() const override { return "fast.relu"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    float *y = a.outputs[0].as<float>();
    parallelSpans(a.inputs[0].numel(), kParallelMinElements, [&](int64_t i, int64_t e) { reluSpan(x + i, y + i, e - i); });
    return Status::OK();
  }
};

// Elements [begin, end) of a training dropout: the mask draw is branch-free 64-bit integer
// arithmetic (inlined into each clone), so the loop vectorises.
TFMRT_SIMD_CLONES void dropoutSpan(const float *x, float *y, int64_t begin, int64_t end, uint64_t key,
                                   uint32_t threshold, float scale) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) y[i] = dropout::kept(key, uint64_t(i), threshold) ? x[i] * scale : 0.0f;
}

class DropoutKernel final : public dropout::KernelBase {
public:
  const char *name() const override { return "fast.dropout"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    float *y = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].numel();
    if (a.numInputs < 2) {  // inference: the identity
      if (n > 0) copy(x, y, size_t(n) * sizeof(float));
      return Status::OK();
    }
    uint64_t key;
    TFMRT_RETURN_IF_ERROR(keyOf(a, key));
    const uint32_t threshold = dropout::dropThreshold(rate_);
    const float scale = float(1.0 / (1.0 - rate_));
    parallelSpans(n, kParallelMinElements, [&](int64_t i, int64_t e) { dropoutSpan(x, y, i, e, key, threshold, scale); });
    return Status::OK();
  }
};

class GeluKernel final : public Kernel {
public:
  const char *name() const override { return "fast.gelu"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    float *y = a.outputs[0].as<float>();
    // ~20 flops per element: worth threads well before memory-bound ops are.
    parallelSpans(a.inputs[0].numel(), kParallelMinElements / 8, [&](int64_t i, int64_t e) { geluSpan(x + i, y + i, e - i); });
    return Status::OK();
  }
};

class AddKernel final : public Kernel {
public:
  const char *name() const override { return "fast.add"; }
  Status run(const KernelArgs &a) const override {
    add(a.inputs[0].as<float>(), a.inputs[1].as<float>(), a.outputs[0].as<float>(), a.inputs[0].numel());
    return Status::OK();
  }
};

class BiasAddKernel final : public Kernel {
public:
  const char *name() const override { return "fast.bias_add"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>(), *bias = a.inputs[1].as<float>();
    float *y = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].dim(-1), rows = rowsOf(a.inputs[0]);
    if (rows == 0 || n == 0) return Status::OK();
    // Spans of whole rows: ceil(minParallel / n) rows is the smallest span worth a thread.
    parallelSpans(rows, std::max<int64_t>(1, kParallelMinElements / n),
                  [&](int64_t r, int64_t e) { biasAddRows(x + r * n, bias, y + r * n, e - r, n); });
    return Status::OK();
  }
};

class MaskKernel final : public Kernel {
public:
  const char *name() const override { return "fast.mask"; }
  Status prepare(const KernelPrepareInfo &info) override {
    causal_ = attrInt(*info.node, "causal") != 0;
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    const uint8_t *keep = a.inputs[1].as<uint8_t>();
    float *y = a.outputs[0].as<float>();
    const TensorRef &s = a.inputs[0];  // [B, H, Q, Kv]
    const int64_t H = s.dim(1), Q = s.dim(2), Kv = s.dim(3), rows = s.dim(0) * H * Q;
    const bool causal = causal_;
#pragma omp parallel for schedule(static) if (rows * Kv >= kParallelMinElements)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t b = r / (H * Q), i = r % Q;
      const int64_t visible = causal ? std::min(Kv, i + 1) : Kv;  // causal: key j > query i is masked
      maskRow(x + r * Kv, keep + b * Kv, y + r * Kv, visible, Kv);
    }
    return Status::OK();
  }

private:
  bool causal_ = false;
};

}  // namespace
}  // namespace fast

void registerFastElementwise(KernelRegistry &r) {
  r.add(dnnlKey("tfm.scale"), makeKernel<fast::ScaleKernel>);
  r.add(dnnlKey("tfm.relu"), makeKernel<fast::ReluKernel>);
  r.add(dnnlKey("tfm.gelu"), makeKernel<fast::GeluKernel>);
  r.add(dnnlKey("tfm.add"), makeKernel<fast::AddKernel>);
  r.add(dnnlKey("tfm.bias_add"), makeKernel<fast::BiasAddKernel>);
  r.add(dnnlKey("tfm.mask"), makeKernel<fast::MaskKernel>);
  r.add(dnnlKey("tfm.dropout"), makeKernel<fast::DropoutKernel>);
}

}  // namespace tfmrt
