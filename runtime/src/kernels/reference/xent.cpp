// tfm.label_smoothed_xent: mean over non-pad positions of
//   -(1 - e) log p[y] - (e / V) sum_v log p[v],  p = softmax(logits);  0 if every target is pad.
// tfm.label_smoothed_xent_grad: its gradient with respect to the logits.
#include <cmath>
#include <cstring>

#include "format.h"
#include "kernels/kernel_util.h"
#include "kernels/reference/reference_kernels.h"
#include "kernels/xent_common.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

class XentKernel final : public xent::KernelBase {
public:
  const char *name() const override { return "reference.label_smoothed_xent"; }
  Status run(const KernelArgs &a) const override {
    const float *logits = a.inputs[0].as<float>();
    const int32_t *targets = a.inputs[1].as<int32_t>();
    const int64_t V = a.inputs[0].dim(-1), positions = a.inputs[1].numel();
    TFMRT_RETURN_IF_ERROR(xent::checkTargets(targets, positions, padId_, V, *a.inputs[1].shape));
    double total = 0.0;
    int64_t count = 0;
#pragma omp parallel for reduction(+ : total, count) if (positions * V >= kParallelMinElements)
    for (int64_t p = 0; p < positions; ++p) {
      if (targets[p] == padId_) continue;
      const float *z = logits + p * V;
      double mx = -INFINITY;
      for (int64_t v = 0; v < V; ++v) mx = std::fmax(mx, double(z[v]));
      double sumExp = 0.0, sumZ = 0.0;
      for (int64_t v = 0; v < V; ++v) {
        sumExp += std::exp(double(z[v]) - mx);
        sumZ += double(z[v]);
      }
      const double lse = mx + std::log(sumExp);
      total += xent::positionLoss(double(z[targets[p]]), lse, sumZ, V, smoothing_);
      ++count;
    }
    a.outputs[0].as<float>()[0] = count ? float(total / double(count)) : 0.0f;
    return Status::OK();
  }
};

// (softmax(z) - q) / count at non-pad targets, q = (1 - e) onehot(y) + e / V.
class XentGradKernel final : public xent::KernelBase {
public:
  const char *name() const override { return "reference.label_smoothed_xent_grad"; }
  Status run(const KernelArgs &a) const override {
    const float *logits = a.inputs[0].as<float>();
    const int32_t *targets = a.inputs[1].as<int32_t>();
    float *dz = a.outputs[0].as<float>();
    const int64_t V = a.inputs[0].dim(-1), positions = a.inputs[1].numel();
    TFMRT_RETURN_IF_ERROR(xent::checkTargets(targets, positions, padId_, V, *a.inputs[1].shape));
    const int64_t count = xent::countTargets(targets, positions, padId_);
    const double inv = count ? 1.0 / double(count) : 0.0;
    for (int64_t p = 0; p < positions; ++p) {
      float *g = dz + p * V;
      if (targets[p] == padId_) {
        std::memset(g, 0, size_t(V) * sizeof(float));
        continue;
      }
      const float *z = logits + p * V;
      double mx = -INFINITY;
      for (int64_t v = 0; v < V; ++v) mx = std::fmax(mx, double(z[v]));
      double sumExp = 0.0;
      for (int64_t v = 0; v < V; ++v) sumExp += std::exp(double(z[v]) - mx);
      for (int64_t v = 0; v < V; ++v) {
        const double q = (v == targets[p] ? 1.0 - smoothing_ : 0.0) + smoothing_ / double(V);
        g[v] = float((std::exp(double(z[v]) - mx) / sumExp - q) * inv);
      }
    }
    return Status::OK();
  }
};


}  // namespace

void registerReferenceXent(KernelRegistry &r) {
  r.add(referenceKey("tfm.label_smoothed_xent"), makeKernel<XentKernel>);
  r.add(referenceKey("tfm.label_smoothed_xent_grad"), makeKernel<XentGradKernel>);
}

}  // namespace tfmrt
