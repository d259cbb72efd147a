// tfm.scale, tfm.relu, tfm.gelu, tfm.add, tfm.bias_add, tfm.dropout (identity without a step).
#include <cmath>
#include <cstring>

#include "format.h"
#include "kernels/dropout_mask.h"
#include "kernels/kernel_util.h"
#include "kernels/reference/reference_kernels.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

class ScaleKernel final : public Kernel {
public:
  const char *name() const override { return "reference.scale"; }
  Status prepare(const KernelPrepareInfo &info) override {
    factor_ = float(attrFloat(*info.node, "factor"));
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    float *y = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].numel();
#pragma omp parallel for if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * factor_;
    return Status::OK();
  }

private:
  float factor_ = 1.0f;
};

class ReluKernel final : public Kernel {
public:
  const char *name() const override { return "reference.relu"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    float *y = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].numel();
#pragma omp parallel for if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    return Status::OK();
  }
};

class GeluKernel final : public Kernel {
public:
  const char *name() const override { return "reference.gelu"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    float *y = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].numel();
    const float invSqrt2 = float(1.0 / std::sqrt(2.0));
#pragma omp parallel for if (n >= kParallelMinElements / 8)
    for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * invSqrt2));
    return Status::OK();
  }
};

class AddKernel final : public Kernel {
public:
  const char *name() const override { return "reference.add"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    const float *z = a.inputs[1].as<float>();
    float *y = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].numel();
#pragma omp parallel for if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] + z[i];
    return Status::OK();
  }
};

class BiasAddKernel final : public Kernel {
public:
  const char *name() const override { return "reference.bias_add"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    const float *bias = a.inputs[1].as<float>();
    float *y = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].dim(-1);
    const int64_t rows = rowsOf(a.inputs[0]);
#pragma omp parallel for if (rows * n >= kParallelMinElements)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) y[r * n + j] = x[r * n + j] + bias[j];
    return Status::OK();
  }
};

// Without a step: the identity (inference). With one: the counter-based mask, element by element.
class DropoutKernel final : public dropout::KernelBase {
public:
  const char *name() const override { return "reference.dropout"; }
  Status run(const KernelArgs &a) const override {
    const int64_t n = a.inputs[0].numel();
    const float *x = a.inputs[0].as<float>();
    float *y = a.outputs[0].as<float>();
    if (a.numInputs < 2) {
      if (n > 0) std::memcpy(y, x, size_t(n) * sizeof(float));
      return Status::OK();
    }
    uint64_t key;
    TFMRT_RETURN_IF_ERROR(keyOf(a, key));
    const uint32_t threshold = dropout::dropThreshold(rate_);
    // The scale rounded to float, as the fast kernel does: both backends give identical bits.
    const float scale = float(1.0 / (1.0 - rate_));
    for (int64_t i = 0; i < n; ++i) y[i] = dropout::kept(key, uint64_t(i), threshold) ? x[i] * scale : 0.0f;
    return Status::OK();
  }
};

}  // namespace

void registerReferenceElementwise(KernelRegistry &r) {
  r.add(referenceKey("tfm.scale"), makeKernel<ScaleKernel>);
  r.add(referenceKey("tfm.relu"), makeKernel<ReluKernel>);
  r.add(referenceKey("tfm.gelu"), makeKernel<GeluKernel>);
  r.add(referenceKey("tfm.add"), makeKernel<AddKernel>);
  r.add(referenceKey("tfm.bias_add"), makeKernel<BiasAddKernel>);
  r.add(referenceKey("tfm.dropout"), makeKernel<DropoutKernel>);
}

}  // namespace tfmrt
