// tfm.label_smoothed_xent and tfm.log_softmax, fast. Cross-entropy: the reference kernel's double-precision libm exp over every
// logit cost more than the vocabulary GEMM itself (base, 2048 x 37000 logits: ~330 ms). Here each
// row is two vectorised passes (max; sum of exp and sum of logits) with the float expApprox, the
// per-row results combined in double, rows in parallel. Same formula as the reference:
//   mean over non-pad positions of -(1 - e) log p[y] - (e / V) sum_v log p[v].
#include <cmath>
#include <limits>

#include "format.h"
#include "kernels/fast_kernels.h"
#include "kernels/attention/attention.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/log_softmax.h"
#include "kernels/xent_common.h"
#include "op_schema.h"

namespace tfmrt {
namespace fast {
namespace {

struct RowSums {
  float max;
  double sumExp;  // sum of exp(z - max)
  double sumZ;    // sum of z
};

// Chunks keep float partial sums short (<= 4096 terms) before they are added in double.
TFMRT_SIMD_CLONES void rowSums(const float *z, int64_t n, RowSums &out) {
  const float mx = rowMax(z, n);  // vectorised (fast_util.h)
  double sumExp = 0.0, sumZ = 0.0;
  for (int64_t begin = 0; begin < n; begin += 4096) {
    const int64_t end = std::min(n, begin + 4096);
    float e = 0.0f, s = 0.0f;
#pragma omp simd reduction(+ : e, s)
    for (int64_t v = begin; v < end; ++v) {
      e += expApprox(z[v] - mx);
      s += z[v];
    }
    sumExp += e;
    sumZ += s;
  }
  out = {mx, sumExp, sumZ};
}

class FastXentKernel final : public xent::KernelBase {
public:
  const char *name() const override { return "fast.label_smoothed_xent"; }
  Status run(const KernelArgs &a) const override {
    const float *logits = a.inputs[0].as<float>();
    const int32_t *targets = a.inputs[1].as<int32_t>();
    const int64_t V = a.inputs[0].dim(-1), positions = a.inputs[1].numel();
    TFMRT_RETURN_IF_ERROR(xent::checkTargets(targets, positions, padId_, V, *a.inputs[1].shape));
    double total = 0.0;
    int64_t count = 0;
#pragma omp parallel for schedule(static) reduction(+ : total, count) if (positions * V >= kParallelMinElements)
    for (int64_t p = 0; p < positions; ++p) {
      if (targets[p] == padId_) continue;
      const float *z = logits + p * V;
      RowSums s;
      rowSums(z, V, s);
      const double lse = double(s.max) + std::log(s.sumExp);
      total += xent::positionLoss(double(z[targets[p]]), lse, s.sumZ, V, smoothing_);
      ++count;
    }
    a.outputs[0].as<float>()[0] = count ? float(total / double(count)) : 0.0f;
    return Status::OK();
  }
};

}  // namespace

void logSoftmaxRows(const float *x, int64_t rows, int64_t n, float *y) {
  if (n == 0) return;
  static const bool avx512 = attention::cpuHasAvx512(), avx2 = !avx512 && attention::cpuHasAvx2Fma();
  if (avx512) {
#pragma omp parallel for schedule(static) if (rows * n >= kParallelMinElements)
    for (int64_t r = 0; r < rows; ++r) logSoftmaxRowAvx512(x + r * n, n, y + r * n);
    return;
  }
  if (avx2) {
#pragma omp parallel for schedule(static) if (rows * n >= kParallelMinElements)
    for (int64_t r = 0; r < rows; ++r) logSoftmaxRowAvx2(x + r * n, n, y + r * n);
    return;
  }
#pragma omp parallel for schedule(static) if (rows * n >= kParallelMinElements)
  for (int64_t r = 0; r < rows; ++r) {
    RowSums s;
    rowSums(x + r * n, n, s);
    const float lse = float(double(s.max) + std::log(s.sumExp));
    const float *xr = x + r * n;
    float *yr = y + r * n;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) yr[j] = xr[j] - lse;
  }
}

namespace {

// tfm.log_softmax: the vocabulary-wide log-probabilities of decode_step. AVX-512 or AVX2 rows
// where the CPU has them (log_softmax_avx512.cpp, log_softmax_avx2.cpp), else the
// cross-entropy's row sums.
class FastLogSoftmaxKernel final : public Kernel {
public:
  const char *name() const override {
    return avx512_ ? "fast.log_softmax_avx512" : avx2_ ? "fast.log_softmax_avx2" : "fast.log_softmax";
  }
  Status prepare(const KernelPrepareInfo &) override {
    avx512_ = attention::cpuHasAvx512();
    avx2_ = !avx512_ && attention::cpuHasAvx2Fma();
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    logSoftmaxRows(a.inputs[0].as<float>(), rowsOf(a.inputs[0]), a.inputs[0].dim(-1), a.outputs[0].as<float>());
    return Status::OK();
  }

private:
  bool avx512_ = false, avx2_ = false;
};

}  // namespace
}  // namespace fast

void registerFastXent(KernelRegistry &r) {
  r.add(dnnlKey("tfm.label_smoothed_xent"), makeKernel<fast::FastXentKernel>);
  r.add(dnnlKey("tfm.log_softmax"), makeKernel<fast::FastLogSoftmaxKernel>);
}

}  // namespace tfmrt
