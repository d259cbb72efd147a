// Reference kernels of the gradient ops (tfm-autodiff): the textbook formulas, accumulated in
// double so they are more accurate than the kernels they will check. Semantics: dialects/tfm/
// README.md, "Gradient ops".
#include <cmath>
#include <cstring>
#include <vector>

#include "format.h"
#include "kernels/kernel_util.h"
#include "kernels/reference/reference_kernels.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

// dW[n, k] = sum_r dy[r, n] x[r, k]
class WeightGradKernel final : public Kernel {
public:
  const char *name() const override { return "reference.weight_grad"; }
  Status run(const KernelArgs &a) const override {
    const float *dy = a.inputs[0].as<float>(), *x = a.inputs[1].as<float>();
    const int64_t N = a.inputs[0].dim(-1), K = a.inputs[1].dim(-1), rows = a.inputs[0].numel() / (N ? N : 1);
    float *dw = a.outputs[0].as<float>();
#pragma omp parallel for if (rows * N * K >= kParallelMinElements)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        double acc = 0.0;
        for (int64_t r = 0; r < rows; ++r) acc += double(dy[r * N + n]) * double(x[r * K + k]);
        dw[n * K + k] = float(acc);
      }
    return Status::OK();
  }
};

// Column sums over all leading positions.
void columnSums(const float *dy, int64_t rows, int64_t n, float *out) {
  for (int64_t j = 0; j < n; ++j) {
    double acc = 0.0;
    for (int64_t r = 0; r < rows; ++r) acc += dy[r * n + j];
    out[j] = float(acc);
  }
}

class BiasGradKernel final : public Kernel {
public:
  const char *name() const override { return "reference.bias_grad"; }
  Status run(const KernelArgs &a) const override {
    const int64_t n = a.inputs[0].dim(-1);
    columnSums(a.inputs[0].as<float>(), rowsOf(a.inputs[0]), n, a.outputs[0].as<float>());
    return Status::OK();
  }
};

class ReluGradKernel final : public Kernel {
public:
  const char *name() const override { return "reference.relu_grad"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>(), *dy = a.inputs[1].as<float>();
    float *dx = a.outputs[0].as<float>();
    for (int64_t i = 0, n = a.inputs[0].numel(); i < n; ++i) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
    return Status::OK();
  }
};

// d/dx [x Phi(x)] = Phi(x) + x phi(x)
class GeluGradKernel final : public Kernel {
public:
  const char *name() const override { return "reference.gelu_grad"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>(), *dy = a.inputs[1].as<float>();
    float *dx = a.outputs[0].as<float>();
    const double invSqrt2 = 1.0 / std::sqrt(2.0), invSqrt2Pi = 1.0 / std::sqrt(2.0 * M_PI);
    for (int64_t i = 0, n = a.inputs[0].numel(); i < n; ++i) {
      const double v = x[i];
      const double cdf = 0.5 * (1.0 + std::erf(v * invSqrt2)), pdf = invSqrt2Pi * std::exp(-0.5 * v * v);
      dx[i] = float(double(dy[i]) * (cdf + v * pdf));
    }
    return Status::OK();
  }
};

class SoftmaxGradKernel final : public Kernel {
public:
  const char *name() const override { return "reference.softmax_grad"; }
  Status run(const KernelArgs &a) const override {
    const float *y = a.inputs[0].as<float>(), *dy = a.inputs[1].as<float>();
    float *dx = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].dim(-1), rows = rowsOf(a.inputs[0]);
#pragma omp parallel for if (rows * n >= kParallelMinElements)
    for (int64_t r = 0; r < rows; ++r) {
      const float *yr = y + r * n, *gr = dy + r * n;
      double dot = 0.0;
      for (int64_t j = 0; j < n; ++j) dot += double(yr[j]) * double(gr[j]);
      for (int64_t j = 0; j < n; ++j) dx[r * n + j] = float(double(yr[j]) * (double(gr[j]) - dot));
    }
    return Status::OK();
  }
};

// Mean and 1 / sqrt(var + eps) of a row (biased variance, two passes in double).
void rowMoments(const float *xr, int64_t n, double epsilon, double &mean, double &rstd) {
  mean = 0.0;
  for (int64_t j = 0; j < n; ++j) mean += xr[j];
  mean /= double(n);
  double var = 0.0;
  for (int64_t j = 0; j < n; ++j) var += (xr[j] - mean) * (xr[j] - mean);
  rstd = 1.0 / std::sqrt(var / double(n) + epsilon);
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * gamma.
class LayerNormGradKernel final : public Kernel {
public:
  const char *name() const override { return "reference.layer_norm_grad"; }
  Status prepare(const KernelPrepareInfo &info) override {
    epsilon_ = attrFloat(*info.node, "epsilon");
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>(), *gamma = a.inputs[1].as<float>(), *dy = a.inputs[2].as<float>();
    float *dx = a.outputs[0].as<float>();
    const int64_t n = a.inputs[0].dim(-1), rows = rowsOf(a.inputs[0]);
#pragma omp parallel for if (rows * n >= kParallelMinElements)
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x + r * n, *gr = dy + r * n;
      double mean, rstd;
      rowMoments(xr, n, epsilon_, mean, rstd);
      double meanG = 0.0, meanGX = 0.0;
      for (int64_t j = 0; j < n; ++j) {
        const double g = double(gr[j]) * gamma[j], xhat = (xr[j] - mean) * rstd;
        meanG += g;
        meanGX += g * xhat;
      }
      meanG /= double(n);
      meanGX /= double(n);
      for (int64_t j = 0; j < n; ++j) {
        const double g = double(gr[j]) * gamma[j], xhat = (xr[j] - mean) * rstd;
        dx[r * n + j] = float(rstd * (g - meanG - xhat * meanGX));
      }
    }
    return Status::OK();
  }

private:
  double epsilon_ = 1e-5;
};

class LayerNormGammaGradKernel final : public Kernel {
public:
  const char *name() const override { return "reference.layer_norm_gamma_grad"; }
  Status prepare(const KernelPrepareInfo &info) override {
    epsilon_ = attrFloat(*info.node, "epsilon");
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>(), *dy = a.inputs[1].as<float>();
    const int64_t n = a.inputs[0].dim(-1), rows = rowsOf(a.inputs[0]);
    std::vector<double> acc(size_t(n), 0.0);  // reference kernel: allocation is fine here
    for (int64_t r = 0; r < rows; ++r) {
      double mean, rstd;
      rowMoments(x + r * n, n, epsilon_, mean, rstd);
      for (int64_t j = 0; j < n; ++j) acc[j] += double(dy[r * n + j]) * (x[r * n + j] - mean) * rstd;
    }
    float *out = a.outputs[0].as<float>();
    for (int64_t j = 0; j < n; ++j) out[j] = float(acc[j]);
    return Status::OK();
  }

private:
  double epsilon_ = 1e-5;
};

class EmbeddingGradKernel final : public Kernel {
public:
  const char *name() const override { return "reference.embedding_grad"; }
  Status run(const KernelArgs &a) const override {
    const int32_t *ids = a.inputs[0].as<int32_t>();
    const float *dy = a.inputs[1].as<float>();
    const int64_t V = a.outputs[0].dim(0), D = a.outputs[0].dim(1), positions = a.inputs[0].numel();
    for (int64_t p = 0; p < positions; ++p)
      if (ids[p] < 0 || ids[p] >= V)
        return invalidArgument(cat("token id ", ids[p], " at flat position ", p, " of ids ", shapeStr(*a.inputs[0].shape),
                                   " is outside the table's ", V, " rows"));
    std::vector<double> acc(size_t(V * D), 0.0);
    for (int64_t p = 0; p < positions; ++p)
      for (int64_t d = 0; d < D; ++d) acc[size_t(ids[p] * D + d)] += dy[p * D + d];
    float *out = a.outputs[0].as<float>();
    for (int64_t i = 0; i < V * D; ++i) out[i] = float(acc[size_t(i)]);
    return Status::OK();
  }
};

class PositionsGradKernel final : public Kernel {
public:
  const char *name() const override { return "reference.positions_grad"; }
  Status run(const KernelArgs &a) const override {
    const float *dy = a.inputs[0].as<float>();
    const int64_t B = a.inputs[0].dim(0), S = a.inputs[0].dim(1), D = a.inputs[0].dim(2);
    const int64_t L = a.outputs[0].dim(0);
    float *out = a.outputs[0].as<float>();
    std::memset(out, 0, size_t(L * D) * sizeof(float));
    for (int64_t s = 0; s < S; ++s)
      for (int64_t d = 0; d < D; ++d) {
        double acc = 0.0;
        for (int64_t b = 0; b < B; ++b) acc += dy[(b * S + s) * D + d];
        out[s * D + d] = float(acc);
      }
    return Status::OK();
  }
};

}  // namespace

void registerReferenceGrad(KernelRegistry &r) {
  r.add(referenceKey("tfm.weight_grad"), makeKernel<WeightGradKernel>);
  r.add(referenceKey("tfm.bias_grad"), makeKernel<BiasGradKernel>);
  r.add(referenceKey("tfm.relu_grad"), makeKernel<ReluGradKernel>);
  r.add(referenceKey("tfm.gelu_grad"), makeKernel<GeluGradKernel>);
  r.add(referenceKey("tfm.softmax_grad"), makeKernel<SoftmaxGradKernel>);
  r.add(referenceKey("tfm.layer_norm_grad"), makeKernel<LayerNormGradKernel>);
  r.add(referenceKey("tfm.layer_norm_gamma_grad"), makeKernel<LayerNormGammaGradKernel>);
  r.add(referenceKey("tfm.embedding_grad", DType::I32), makeKernel<EmbeddingGradKernel>);  // keyed by the ids
  r.add(referenceKey("tfm.positions_grad"), makeKernel<PositionsGradKernel>);
}

}  // namespace tfmrt
