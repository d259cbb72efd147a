// tfm.lr_schedule, tfm.adam_update, tfm.sum_squares and tfm.clip_scale (tfm-apply-adam's ops), tfm.grad_accumulate. One implementation serves both
// backends: the update is a single pass over the parameter, vectorised, rows of threads.
#include <cmath>
#include <vector>

#include "format.h"
#include "kernels/kernel_util.h"
#include "kernels/reference/reference_kernels.h"
#include "op_schema.h"
#include "tfmrt/model_info.h"

namespace tfmrt {
namespace {

Status readStep(const TensorRef &t, int32_t &step) {
  step = t.as<int32_t>()[0];
  if (step < 1) return invalidArgument(cat("step must be >= 1 (the step being taken), got ", step));
  return Status::OK();
}

class LrScheduleKernel final : public Kernel {
public:
  const char *name() const override { return "reference.lr_schedule"; }
  Status prepare(const KernelPrepareInfo &info) override {
    scale_ = attrFloat(*info.node, "lr_scale");
    dModel_ = double(attrInt(*info.node, "d_model"));
    warmup_ = double(attrInt(*info.node, "warmup_steps"));
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    int32_t step;
    TFMRT_RETURN_IF_ERROR(readStep(a.inputs[0], step));
    const double s = step;
    a.outputs[0].as<float>()[0] = float(scheduledLearningRate(scale_, dModel_, warmup_, s));
    return Status::OK();
  }

private:
  double scale_ = 1.0, dModel_ = 1.0, warmup_ = 1.0;
};

// The moments m, v are operands #4 and #5: session state written in place (the Session owns them,
// checkpoints save them, setting weights zeroes them).
class AdamUpdateKernel final : public Kernel {
public:
  const char *name() const override { return "reference.adam_update"; }
  Status prepare(const KernelPrepareInfo &info) override {
    beta1_ = attrFloat(*info.node, "beta1");
    beta2_ = attrFloat(*info.node, "beta2");
    eps_ = attrFloat(*info.node, "epsilon");
    weightDecay_ = attrFloat(*info.node, "weight_decay");
    if (!info.knownBeforeRun[0] || info.inputs[0]->kind != ValueKind::Parameter)
      return invalidArgument(cat("tfm.adam_update must update a parameter, got '", info.inputs[0]->name, "'"));
    for (size_t i : {size_t(4), size_t(5)})
      if (info.inputs[i]->kind != ValueKind::State)
        return invalidArgument(cat("tfm.adam_update's moments must be session state, got '", info.inputs[i]->name, "'"));
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    float *param = a.inputs[0].as<float>();
    const float *grad = a.inputs[1].as<float>();
    const float lr = a.inputs[2].as<float>()[0];
    int32_t step;
    TFMRT_RETURN_IF_ERROR(readStep(a.inputs[3], step));
    float *m = a.inputs[4].as<float>(), *v = a.inputs[5].as<float>();
    // Gradient clipping's factor (tfm.clip_scale), when the op has one: g is read as scale * g.
    const float scale = a.numInputs > 6 ? a.inputs[6].as<float>()[0] : 1.0f;
    const int64_t n = a.inputs[0].numel();
    // Bias corrections folded into two scalars: p -= lr / c1 * m / (sqrt(v) / sqrt(c2) + eps).
    const double c1 = 1.0 - std::pow(beta1_, step), c2 = 1.0 - std::pow(beta2_, step);
    const float stepSize = float(lr / c1), invSqrtC2 = float(1.0 / std::sqrt(c2));
    const float b1 = float(beta1_), b2 = float(beta2_), eps = float(eps_);
    // Decoupled weight decay (AdamW): p *= 1 - lr * wd before the step (1 exactly without it).
    const float keep = float(1.0 - double(lr) * weightDecay_);
    double sq = 0.0;
#pragma omp parallel for simd reduction(+ : sq) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) {
      const float raw = grad[i], g = scale * raw;
      m[i] = b1 * m[i] + (1.0f - b1) * g;
      v[i] = b2 * v[i] + (1.0f - b2) * g * g;
      param[i] = keep * param[i] - stepSize * m[i] / (std::sqrt(v[i]) * invSqrtC2 + eps);
      sq += double(raw) * double(raw);
    }
    a.outputs[0].as<float>()[0] = float(sq);
    return Status::OK();
  }

private:
  double beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8, weightDecay_ = 0;
};

// tfm.sum_squares: sum(x^2) in f64 (a gradient's share of the global norm, for clipping).
class SumSquaresKernel final : public Kernel {
public:
  const char *name() const override { return "reference.sum_squares"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    const int64_t n = a.inputs[0].numel();
    double sq = 0.0;
#pragma omp parallel for simd reduction(+ : sq) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) sq += double(x[i]) * double(x[i]);
    a.outputs[0].as<float>()[0] = float(sq);
    return Status::OK();
  }
};

// tfm.clip_scale: min(1, max_norm / (sqrt(sq_norm) + 1e-6)), as torch.nn.utils.clip_grad_norm_
// (1.13) computes it. NaN stays NaN (std::min would return 1 for it and hide a diverged step).
class ClipScaleKernel final : public Kernel {
public:
  const char *name() const override { return "reference.clip_scale"; }
  Status prepare(const KernelPrepareInfo &info) override {
    maxNorm_ = attrFloat(*info.node, "max_norm");
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const double sq = a.inputs[0].as<float>()[0];
    const double factor = maxNorm_ / (std::sqrt(sq) + 1e-6);
    a.outputs[0].as<float>()[0] = std::isnan(factor) ? float(factor) : float(factor < 1.0 ? factor : 1.0);
    return Status::OK();
  }

private:
  double maxNorm_ = 1.0;
};

// tfm.grad_accumulate: accumulator = (reset ? 0 : accumulator) + weight * grad. The accumulator
// (operand #0) is session state written in place; reset overwrites, so nothing stale is read.
class GradAccumulateKernel final : public Kernel {
public:
  const char *name() const override { return "reference.grad_accumulate"; }
  Status prepare(const KernelPrepareInfo &info) override {
    if (info.inputs[0]->kind != ValueKind::State)
      return invalidArgument(cat("tfm.grad_accumulate's accumulator must be session state, got '", info.inputs[0]->name, "'"));
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    float *acc = a.outputs[0].as<float>();
    const float *grad = a.inputs[1].as<float>();
    const float weight = a.inputs[2].as<float>()[0];
    const bool reset = a.inputs[3].as<int32_t>()[0] != 0;
    const int64_t n = a.inputs[1].numel();
    if (reset) {
#pragma omp parallel for simd if (n >= kParallelMinElements)
      for (int64_t i = 0; i < n; ++i) acc[i] = weight * grad[i];
    } else {
#pragma omp parallel for simd if (n >= kParallelMinElements)
      for (int64_t i = 0; i < n; ++i) acc[i] += weight * grad[i];
    }
    return Status::OK();
  }
};

}  // namespace

void registerReferenceOptimizer(KernelRegistry &r) {
  r.add(referenceKey("tfm.lr_schedule", DType::I32), makeKernel<LrScheduleKernel>);  // keyed by the step
  r.add(referenceKey("tfm.adam_update"), makeKernel<AdamUpdateKernel>);
  r.add(referenceKey("tfm.grad_accumulate"), makeKernel<GradAccumulateKernel>);
  r.add(referenceKey("tfm.sum_squares"), makeKernel<SumSquaresKernel>);
  r.add(referenceKey("tfm.clip_scale"), makeKernel<ClipScaleKernel>);
}

}  // namespace tfmrt
