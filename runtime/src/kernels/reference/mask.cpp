// tfm.padding_mask (ids != pad_id) and tfm.mask (-inf on dropped keys and, if causal, j > i).
#include <limits>

#include "kernels/kernel_util.h"
#include "kernels/reference/reference_kernels.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

class PaddingMaskKernel final : public Kernel {
public:
  const char *name() const override { return "reference.padding_mask"; }
  Status prepare(const KernelPrepareInfo &info) override {
    padId_ = int32_t(attrInt(*info.node, "pad_id"));
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    // __restrict and a local pad id: a uint8_t store may alias anything, so without them GCC
    // reloaded both per element and kept the loop scalar (40 us per decode_step at 128 slots).
    const int32_t *__restrict ids = a.inputs[0].as<int32_t>();
    uint8_t *__restrict keep = a.outputs[0].as<uint8_t>();
    const int64_t n = a.inputs[0].numel();
    const int32_t pad = padId_;
    for (int64_t i = 0; i < n; ++i) keep[i] = ids[i] != pad ? 1 : 0;
    return Status::OK();
  }

private:
  int32_t padId_ = 0;
};

class MaskKernel final : public Kernel {
public:
  const char *name() const override { return "reference.mask"; }
  Status prepare(const KernelPrepareInfo &info) override {
    causal_ = attrInt(*info.node, "causal") != 0;
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    const uint8_t *keep = a.inputs[1].as<uint8_t>();
    float *y = a.outputs[0].as<float>();
    const TensorRef &s = a.inputs[0];  // [B, H, Q, Kv]
    const int64_t B = s.dim(0), H = s.dim(1), Q = s.dim(2), Kv = s.dim(3);
    const float ninf = -std::numeric_limits<float>::infinity();
#pragma omp parallel for collapse(2) if (B * H * Q * Kv >= kParallelMinElements)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < Q; ++i)
          for (int64_t j = 0; j < Kv; ++j) {
            const int64_t at = ((b * H + h) * Q + i) * Kv + j;
            const bool masked = keep[b * Kv + j] == 0 || (causal_ && j > i);
            y[at] = masked ? ninf : x[at];
          }
    return Status::OK();
  }

private:
  bool causal_ = false;
};

}  // namespace

void registerReferenceMask(KernelRegistry &r) {
  r.add(referenceKey("tfm.padding_mask", DType::I32), makeKernel<PaddingMaskKernel>);
  r.add(referenceKey("tfm.mask"), makeKernel<MaskKernel>);
}

}  // namespace tfmrt
