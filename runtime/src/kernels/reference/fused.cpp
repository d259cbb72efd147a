// Reference kernels of the fused ops produced by the compiler's passes: tfm.linear
// (act(x W^T + bias) + residual, accumulated in double), tfm.concat (axis 0) and tfm.slice_last.
// tfm.add_layer_norm lives with tfm.layer_norm (layer_norm.cpp) so both share one row routine.
#include <cmath>
#include <cstring>

#include "kernels/kernel_util.h"
#include "kernels/reference/reference_kernels.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

enum class Activation { None, Relu, Gelu };

Activation parseActivation(const Node &node) {
  const std::string a = attrString(node, "activation");
  return a == "relu" ? Activation::Relu : a == "gelu" ? Activation::Gelu : Activation::None;
}

class LinearKernel final : public Kernel {
public:
  const char *name() const override { return "reference.linear"; }
  Status prepare(const KernelPrepareInfo &info) override {
    act_ = parseActivation(*info.node);
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const TensorRef &X = a.inputs[0], &W = a.inputs[1];
    const float *x = X.as<float>(), *w = W.as<float>(), *bias = a.inputs[2].as<float>();
    const float *residual = a.numInputs == 4 ? a.inputs[3].as<float>() : nullptr;
    float *y = a.outputs[0].as<float>();
    // Rows from the result: with K = 0 the input has no elements but y = act(bias) + residual.
    const int64_t m = rowsOf(a.outputs[0]), k = X.dim(-1), n = W.dim(0);
#pragma omp parallel for collapse(2) if (m * n * k >= kParallelMinElements)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = bias[j];
        for (int64_t t = 0; t < k; ++t) acc += double(x[i * k + t]) * double(w[j * k + t]);
        if (act_ == Activation::Relu) acc = acc > 0 ? acc : 0;
        if (act_ == Activation::Gelu) acc = 0.5 * acc * (1.0 + std::erf(acc / std::sqrt(2.0)));
        if (residual) acc += residual[i * n + j];
        y[i * n + j] = float(acc);
      }
    return Status::OK();
  }

private:
  Activation act_ = Activation::None;
};

// Row-major tensors concatenated along axis 0 are their byte ranges one after another.
class ConcatKernel final : public Kernel {
public:
  const char *name() const override { return "reference.concat"; }
  Status run(const KernelArgs &a) const override {
    uint8_t *y = static_cast<uint8_t *>(a.outputs[0].data);
    for (size_t i = 0; i < a.numInputs; ++i) {
      const size_t bytes = size_t(a.inputs[i].numel()) * sizeof(float);
      if (bytes) std::memcpy(y, a.inputs[i].data, bytes);
      y += bytes;
    }
    return Status::OK();
  }
};

class SliceLastKernel final : public Kernel {
public:
  const char *name() const override { return "reference.slice_last"; }
  Status prepare(const KernelPrepareInfo &info) override {
    offset_ = attrInt(*info.node, "offset");
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    float *y = a.outputs[0].as<float>();
    const int64_t w = a.inputs[0].dim(-1), size = a.outputs[0].dim(-1), rows = rowsOf(a.inputs[0]);
    for (int64_t r = 0; r < rows; ++r) std::memcpy(y + r * size, x + r * w + offset_, size_t(size) * sizeof(float));
    return Status::OK();
  }

private:
  int64_t offset_ = 0;
};

// Row b's position T - 1 (a T = 0 input has no last position: the result rows are zeros).
class LastPositionKernel final : public Kernel {
public:
  const char *name() const override { return "reference.last_position"; }
  Status run(const KernelArgs &a) const override {
    const int64_t B = a.inputs[0].dim(0), T = a.inputs[0].dim(1), D = a.inputs[0].dim(2);
    const float *x = a.inputs[0].as<float>();
    float *y = a.outputs[0].as<float>();
    for (int64_t b = 0; b < B; ++b) {
      if (T == 0) std::memset(y + b * D, 0, size_t(D) * sizeof(float));
      else std::memcpy(y + b * D, x + (b * T + T - 1) * D, size_t(D) * sizeof(float));
    }
    return Status::OK();
  }
};

}  // namespace

void registerReferenceFused(KernelRegistry &r) {
  r.add(referenceKey("tfm.linear"), makeKernel<LinearKernel>);
  r.add(referenceKey("tfm.linear", DType::F32, Layout::Packed), makeKernel<LinearKernel>);
  // The reference backend computes bf16 and int8 sites in f32: the oracle they are compared to.
  r.add(referenceKey("tfm.linear", DType::F32, Layout::PackedBf16), makeKernel<LinearKernel>);
  r.add(referenceKey("tfm.linear", DType::F32, Layout::PackedInt8), makeKernel<LinearKernel>);
  r.add(referenceKey("tfm.concat"), makeKernel<ConcatKernel>);
  r.add(referenceKey("tfm.slice_last"), makeKernel<SliceLastKernel>);
  r.add(referenceKey("tfm.last_position"), makeKernel<LastPositionKernel>);
}

}  // namespace tfmrt
