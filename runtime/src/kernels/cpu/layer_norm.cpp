// tfm.layer_norm and tfm.add_layer_norm, the fast kernels of the Dnnl backend. Hand-written rather
// than oneDNN's: oneDNN 2.6 only has the non-JIT simple_layer_normalization, which a fused row
// loop beats. Per row: one pass for the mean (add_layer_norm: the pass that reads a and b and
// stores a + b into the output row), a second for the (biased) variance around it -- numerically
// safer than E[x^2] - E[x]^2 -- and a third that normalizes. The row stays in L1 after the first
// pass, so add_layer_norm reads a and b from memory once and writes y once: the sum never makes
// a round trip through memory as it does between tfm.add and tfm.layer_norm.
#include "kernels/fast_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "op_schema.h"

namespace tfmrt {
namespace fast {
namespace {

// Rows [0, rows) of y = layer_norm(x (+ z)). `z` may be null.
TFMRT_SIMD_CLONES void layerNormRows(const float *x, const float *z, const float *gamma, const float *beta, float *y,
                                     int64_t rows, int64_t n, float eps) {
  const float invN = 1.0f / float(n);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * n;
    float *yr = y + r * n;
    float sum = 0.0f;
    if (z) {
      const float *zr = z + r * n;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < n; ++j) {
        const float s = xr[j] + zr[j];
        yr[j] = s;
        sum += s;
      }
      xr = yr;  // normalize the sum in place
    } else {
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < n; ++j) sum += xr[j];
    }
    const float mean = sum * invN;
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (int64_t j = 0; j < n; ++j) {
      const float d = xr[j] - mean;
      sq += d * d;
    }
    const float rstd = 1.0f / std::sqrt(sq * invN + eps);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
  }
}

void layerNorm(const float *x, const float *z, const float *gamma, const float *beta, float *y, int64_t rows,
               int64_t n, float eps) {
  if (rows == 0 || n == 0) return;
  parallelSpans(rows, std::max<int64_t>(1, kParallelMinElements / n), [&](int64_t r, int64_t e) {
    layerNormRows(x + r * n, z ? z + r * n : nullptr, gamma, beta, y + r * n, e - r, n, eps);
  });
}

class FastLayerNormKernel final : public Kernel {
public:
  const char *name() const override { return "fast.layer_norm"; }
  Status prepare(const KernelPrepareInfo &info) override {
    epsilon_ = float(attrFloat(*info.node, "epsilon"));
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    layerNorm(a.inputs[0].as<float>(), nullptr, a.inputs[1].as<float>(), a.inputs[2].as<float>(),
              a.outputs[0].as<float>(), rowsOf(a.inputs[0]), a.inputs[0].dim(-1), epsilon_);
    return Status::OK();
  }

private:
  float epsilon_ = 1e-5f;
};

class FastAddLayerNormKernel final : public Kernel {
public:
  const char *name() const override { return "fast.add_layer_norm"; }
  Status prepare(const KernelPrepareInfo &info) override {
    epsilon_ = float(attrFloat(*info.node, "epsilon"));
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    layerNorm(a.inputs[0].as<float>(), a.inputs[1].as<float>(), a.inputs[2].as<float>(), a.inputs[3].as<float>(),
              a.outputs[0].as<float>(), rowsOf(a.inputs[0]), a.inputs[0].dim(-1), epsilon_);
    return Status::OK();
  }

private:
  float epsilon_ = 1e-5f;
};

}  // namespace
}  // namespace fast

void registerFastLayerNorm(KernelRegistry &r) {
  r.add(dnnlKey("tfm.layer_norm"), makeKernel<fast::FastLayerNormKernel>);
  r.add(dnnlKey("tfm.add_layer_norm"), makeKernel<fast::FastAddLayerNormKernel>);
}

}  // namespace tfmrt
