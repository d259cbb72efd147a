// tfm.softmax over the last axis. A row that is entirely -inf (every key masked) gives zeros.
#include <cmath>
#include <limits>

#include "kernels/kernel_util.h"
#include "kernels/reference/reference_kernels.h"

namespace tfmrt {
namespace {

class SoftmaxKernel final : public Kernel {
public:
  const char *name() const override { return "reference.softmax"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    float *y = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].dim(-1), rows = rowsOf(a.inputs[0]);
#pragma omp parallel for if (rows * n >= kParallelMinElements)
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x + r * n;
      float *yr = y + r * n;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j) mx = std::fmax(mx, xr[j]);
      if (mx == -std::numeric_limits<float>::infinity()) {
        for (int64_t j = 0; j < n; ++j) yr[j] = 0.0f;
        continue;
      }
      double sum = 0.0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(double(xr[j]) - mx);
      for (int64_t j = 0; j < n; ++j) yr[j] = float(std::exp(double(xr[j]) - mx) / sum);
    }
    return Status::OK();
  }
};

// log(softmax(x)) = x - max - log(sum exp(x - max)), in double.
class LogSoftmaxKernel final : public Kernel {
public:
  const char *name() const override { return "reference.log_softmax"; }
  Status run(const KernelArgs &a) const override {
    logSoftmaxRowsReference(a.inputs[0].as<float>(), rowsOf(a.inputs[0]), a.inputs[0].dim(-1), a.outputs[0].as<float>());
    return Status::OK();
  }
};

}  // namespace

void logSoftmaxRowsReference(const float *x, int64_t rows, int64_t n, float *y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * n;
    double mx = -std::numeric_limits<double>::infinity(), sum = 0.0;
    for (int64_t j = 0; j < n; ++j) mx = std::fmax(mx, double(xr[j]));
    for (int64_t j = 0; j < n; ++j) sum += std::exp(double(xr[j]) - mx);
    const double lse = mx + std::log(sum);
    for (int64_t j = 0; j < n; ++j) y[r * n + j] = float(double(xr[j]) - lse);
  }
}

void registerReferenceSoftmax(KernelRegistry &r) {
  r.add(referenceKey("tfm.softmax"), makeKernel<SoftmaxKernel>);
  r.add(referenceKey("tfm.log_softmax"), makeKernel<LogSoftmaxKernel>);
}

}  // namespace tfmrt
