// tfm.layer_norm_grad and tfm.layer_norm_gamma_grad, the fast kernels of the Dnnl backend: the
// reference kernels' formulas (kernels/reference/grad.cpp) in float with vectorised row passes
// instead of double scalar loops. Both recompute the row's mean and rstd as the forward kernel
// does (two passes), rather than storing them.
//
// dgamma sums over rows. Rows are taken in fixed blocks of kGammaBlockRows, each block's sums go
// to its own scratch row, and the blocks are added in order: the result has the same bits at any
// thread count (resume must reproduce a run exactly, whatever --threads).
#include <cmath>
#include <vector>

#include "kernels/fast_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "op_schema.h"

namespace tfmrt {
namespace fast {
namespace {

constexpr int64_t kGammaBlockRows = 32;

TFMRT_SIMD_CLONES void rowMoments(const float *xr, int64_t n, float eps, float &mean, float &rstd) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) sum += xr[j];
  mean = sum / float(n);
  float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
  for (int64_t j = 0; j < n; ++j) {
    const float d = xr[j] - mean;
    sq += d * d;
  }
  rstd = 1.0f / std::sqrt(sq / float(n) + eps);
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * gamma, rows [0, rows).
TFMRT_SIMD_CLONES void layerNormGradRows(const float *x, const float *gamma, const float *dy, float *dx, int64_t rows,
                                         int64_t n, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * n, *gr = dy + r * n;
    float mean, rstd;
    rowMoments(xr, n, eps, mean, rstd);
    float sumG = 0.0f, sumGX = 0.0f;
#pragma omp simd reduction(+ : sumG, sumGX)
    for (int64_t j = 0; j < n; ++j) {
      const float g = gr[j] * gamma[j];
      sumG += g;
      sumGX += g * (xr[j] - mean);
    }
    const float meanG = sumG / float(n), meanGX = sumGX * rstd / float(n);
    float *out = dx + r * n;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) out[j] = rstd * (gr[j] * gamma[j] - meanG - (xr[j] - mean) * rstd * meanGX);
  }
}

// acc[j] = sum over rows [0, rows) of dy * xhat.
TFMRT_SIMD_CLONES void gammaGradBlock(const float *x, const float *dy, float *acc, int64_t rows, int64_t n, float eps) {
  for (int64_t j = 0; j < n; ++j) acc[j] = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * n, *gr = dy + r * n;
    float mean, rstd;
    rowMoments(xr, n, eps, mean, rstd);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) acc[j] += gr[j] * ((xr[j] - mean) * rstd);
  }
}

class FastLayerNormGradKernel final : public Kernel {
public:
  const char *name() const override { return "fast.layer_norm_grad"; }
  Status prepare(const KernelPrepareInfo &info) override {
    epsilon_ = float(attrFloat(*info.node, "epsilon"));
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>(), *gamma = a.inputs[1].as<float>(), *dy = a.inputs[2].as<float>();
    float *dx = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].dim(-1), rows = rowsOf(a.inputs[0]);
    if (rows == 0 || n == 0) return Status::OK();
    parallelSpans(rows, std::max<int64_t>(1, kParallelMinElements / n), [&](int64_t r, int64_t e) {
      layerNormGradRows(x + r * n, gamma, dy + r * n, dx + r * n, e - r, n, epsilon_);
    });
    return Status::OK();
  }

private:
  float epsilon_ = 1e-5f;
};

class FastLayerNormGammaGradKernel final : public Kernel {
public:
  const char *name() const override { return "fast.layer_norm_gamma_grad"; }
  Status prepare(const KernelPrepareInfo &info) override {
    epsilon_ = float(attrFloat(*info.node, "epsilon"));
    return Status::OK();
  }
  // One row of partial sums per block of rows, in the plan's scratch.
  size_t scratchBytes(const std::vector<const std::vector<int64_t> *> &in, int) const override {
    const std::vector<int64_t> &shape = *in[0];
    if (shape.empty()) return 0;
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
    const int64_t blocks = (rows + kGammaBlockRows - 1) / kGammaBlockRows;
    return size_t(std::max<int64_t>(blocks, 1) * shape.back()) * sizeof(float);
  }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>(), *dy = a.inputs[1].as<float>();
    float *out = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].dim(-1), rows = rowsOf(a.inputs[0]);
    if (n == 0) return Status::OK();
    const int64_t blocks = (rows + kGammaBlockRows - 1) / kGammaBlockRows;
    if (size_t(std::max<int64_t>(blocks, 1) * n) * sizeof(float) > a.scratchBytes)
      return internalError("layer_norm_gamma_grad: scratch too small");
    float *partial = static_cast<float *>(a.scratch);
#pragma omp parallel for schedule(static) if (rows * n >= kParallelMinElements)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t r0 = b * kGammaBlockRows, count = std::min(kGammaBlockRows, rows - r0);
      gammaGradBlock(x + r0 * n, dy + r0 * n, partial + b * n, count, n, epsilon_);
    }
    for (int64_t j = 0; j < n; ++j) out[j] = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {
      const float *p = partial + b * n;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) out[j] += p[j];
    }
    return Status::OK();
  }

private:
  float epsilon_ = 1e-5f;
};

}  // namespace
}  // namespace fast

void registerFastLayerNormGrad(KernelRegistry &r) {
  r.add(dnnlKey("tfm.layer_norm_grad"), makeKernel<fast::FastLayerNormGradKernel>);
  r.add(dnnlKey("tfm.layer_norm_gamma_grad"), makeKernel<fast::FastLayerNormGammaGradKernel>);
}

}  // namespace tfmrt
