// tfm.layer_norm over the last axis, biased variance (two-pass, in double).
#include <cmath>

#include "kernels/kernel_util.h"
#include "kernels/reference/reference_kernels.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

class LayerNormKernel final : public Kernel {
public:
  const char *name() const override { return "reference.layer_norm"; }
  Status prepare(const KernelPrepareInfo &info) override {
    epsilon_ = attrFloat(*info.node, "epsilon");
    return Status::OK();
  }
  Status run(const KernelArgs &a) override {
    const float *x = a.inputs[0].as<float>();
    const float *gamma = a.inputs[1].as<float>();
    const float *beta = a.inputs[2].as<float>();
    float *y = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].dim(-1), rows = rowsOf(a.inputs[0]);
#pragma omp parallel for if (rows * n >= kParallelMinElements)
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x + r * n;
      double mean = 0.0, var = 0.0;
      for (int64_t j = 0; j < n; ++j) mean += xr[j];
      mean /= double(n);
      for (int64_t j = 0; j < n; ++j) var += (xr[j] - mean) * (xr[j] - mean);
      var /= double(n);
      const double inv = 1.0 / std::sqrt(var + epsilon_);
      for (int64_t j = 0; j < n; ++j) y[r * n + j] = float((xr[j] - mean) * inv * gamma[j] + beta[j]);
    }
    return Status::OK();
  }

private:
  double epsilon_ = 1e-5;
};

}  // namespace

void registerReferenceLayerNorm(KernelRegistry &r) { r.add(referenceKey("tfm.layer_norm"), makeKernel<LayerNormKernel>); }

}  // namespace tfmrt
