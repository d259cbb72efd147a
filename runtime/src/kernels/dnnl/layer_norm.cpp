// tfm.layer_norm, the fast kernel of the Dnnl backend. Hand-written rather than oneDNN's: oneDNN
// 2.6 only has the non-JIT simple_layer_normalization, which a fused row loop beats. One pass
// loads the row for the mean, a second computes the (biased) variance around it -- numerically
// safer than E[x^2] - E[x]^2 -- and a third normalizes; rows stay in L1 throughout.
#include <cmath>

#include "kernels/dnnl/dnnl_kernels.h"
#include "kernels/kernel_util.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

class FastLayerNormKernel final : public Kernel {
public:
  const char *name() const override { return "fast.layer_norm"; }
  Status prepare(const KernelPrepareInfo &info) override {
    epsilon_ = float(attrFloat(*info.node, "epsilon"));
    return Status::OK();
  }
  Status run(const KernelArgs &a) override {
    const float *x = a.inputs[0].as<float>();
    const float *gamma = a.inputs[1].as<float>();
    const float *beta = a.inputs[2].as<float>();
    float *y = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].dim(-1), rows = rowsOf(a.inputs[0]);
    if (n == 0) return Status::OK();
    const float invN = 1.0f / float(n), eps = epsilon_;
#pragma omp parallel for schedule(static) if (rows * n >= kParallelMinElements)
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x + r * n;
      float *yr = y + r * n;
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < n; ++j) sum += xr[j];
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
    return Status::OK();
  }

private:
  float epsilon_ = 1e-5f;
};

}  // namespace

void registerFastLayerNorm(KernelRegistry &r) { r.add(dnnlKey("tfm.layer_norm"), makeKernel<FastLayerNormKernel>); }

}  // namespace tfmrt
