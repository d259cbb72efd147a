// tfm.layer_norm over the last axis, biased variance (two-pass, in double), and
// tfm.add_layer_norm = layer_norm(a + b) through the same row routine: the sum is rounded to f32
// first, exactly as tfm.add would, so the fused oracle equals the unfused one bit for bit.
#include <cmath>

#include "kernels/kernel_util.h"
#include "kernels/reference/reference_kernels.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

void normalizeRow(const float *xr, const float *gamma, const float *beta, float *yr, int64_t n, double epsilon) {
  double mean = 0.0, var = 0.0;
  for (int64_t j = 0; j < n; ++j) mean += xr[j];
  mean /= double(n);
  for (int64_t j = 0; j < n; ++j) var += (xr[j] - mean) * (xr[j] - mean);
  var /= double(n);
  const double inv = 1.0 / std::sqrt(var + epsilon);
  for (int64_t j = 0; j < n; ++j) yr[j] = float((xr[j] - mean) * inv * gamma[j] + beta[j]);
}

class LayerNormKernel final : public Kernel {
public:
  const char *name() const override { return "reference.layer_norm"; }
  Status prepare(const KernelPrepareInfo &info) override {
    epsilon_ = attrFloat(*info.node, "epsilon");
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    const float *gamma = a.inputs[1].as<float>();
    const float *beta = a.inputs[2].as<float>();
    float *y = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].dim(-1), rows = rowsOf(a.inputs[0]);
#pragma omp parallel for if (rows * n >= kParallelMinElements)
    for (int64_t r = 0; r < rows; ++r) normalizeRow(x + r * n, gamma, beta, y + r * n, n, epsilon_);
    return Status::OK();
  }

private:
  double epsilon_ = 1e-5;
};

class AddLayerNormKernel final : public Kernel {
public:
  const char *name() const override { return "reference.add_layer_norm"; }
  Status prepare(const KernelPrepareInfo &info) override {
    epsilon_ = attrFloat(*info.node, "epsilon");
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    const float *z = a.inputs[1].as<float>();
    const float *gamma = a.inputs[2].as<float>();
    const float *beta = a.inputs[3].as<float>();
    float *y = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].dim(-1), rows = rowsOf(a.inputs[0]);
    // The output row holds the f32 sum, then is normalized in place (run() never allocates).
#pragma omp parallel for if (rows * n >= kParallelMinElements)
    for (int64_t r = 0; r < rows; ++r) {
      float *yr = y + r * n;
      for (int64_t j = 0; j < n; ++j) yr[j] = x[r * n + j] + z[r * n + j];
      normalizeRow(yr, gamma, beta, yr, n, epsilon_);
    }
    return Status::OK();
  }

private:
  double epsilon_ = 1e-5;
};

}  // namespace

void registerReferenceLayerNorm(KernelRegistry &r) {
  r.add(referenceKey("tfm.layer_norm"), makeKernel<LayerNormKernel>);
  r.add(referenceKey("tfm.add_layer_norm"), makeKernel<AddLayerNormKernel>);
}

}  // namespace tfmrt
