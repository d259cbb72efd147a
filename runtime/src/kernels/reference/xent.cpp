// tfm.label_smoothed_xent: mean over non-pad positions of
//   -(1 - e) log p[y] - (e / V) sum_v log p[v],  p = softmax(logits);  0 if every target is pad.
#include <cmath>

#include "format.h"
#include "kernels/kernel_util.h"
#include "kernels/reference/reference_kernels.h"
#include "kernels/xent_common.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

class XentKernel final : public Kernel {
public:
  const char *name() const override { return "reference.label_smoothed_xent"; }
  Status prepare(const KernelPrepareInfo &info) override {
    smoothing_ = attrFloat(*info.node, "smoothing");
    padId_ = int32_t(attrInt(*info.node, "pad_id"));
    return Status::OK();
  }
  Status run(const KernelArgs &a) override {
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

private:
  double smoothing_ = 0.0;
  int32_t padId_ = 0;
};

}  // namespace

void registerReferenceXent(KernelRegistry &r) {
  r.add(referenceKey("tfm.label_smoothed_xent"), makeKernel<XentKernel>);
}

}  // namespace tfmrt
