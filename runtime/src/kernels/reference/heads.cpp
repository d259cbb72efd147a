// tfm.split_heads [B, S, H*K] -> [B, H, S, K] and its inverse tfm.merge_heads.
#include <cstring>

#include "kernels/kernel_util.h"
#include "kernels/reference/reference_kernels.h"

namespace tfmrt {
namespace {

class SplitHeadsKernel final : public Kernel {
public:
  const char *name() const override { return "reference.split_heads"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    float *y = a.outputs[0].as<float>();
    const TensorRef &o = a.outputs[0];  // [B, H, S, K]
    const int64_t B = o.dim(0), H = o.dim(1), S = o.dim(2), K = o.dim(3);
#pragma omp parallel for collapse(2) if (B * H * S * K >= kParallelMinElements)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t s = 0; s < S; ++s)
          std::memcpy(y + ((b * H + h) * S + s) * K, x + (b * S + s) * H * K + h * K, size_t(K) * sizeof(float));
    return Status::OK();
  }
};

class MergeHeadsKernel final : public Kernel {
public:
  const char *name() const override { return "reference.merge_heads"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    float *y = a.outputs[0].as<float>();
    const TensorRef &i = a.inputs[0];  // [B, H, S, K]
    const int64_t B = i.dim(0), H = i.dim(1), S = i.dim(2), K = i.dim(3);
#pragma omp parallel for collapse(2) if (B * H * S * K >= kParallelMinElements)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t s = 0; s < S; ++s)
          std::memcpy(y + (b * S + s) * H * K + h * K, x + ((b * H + h) * S + s) * K, size_t(K) * sizeof(float));
    return Status::OK();
  }
};

}  // namespace

void registerReferenceHeads(KernelRegistry &r) {
  r.add(referenceKey("tfm.split_heads"), makeKernel<SplitHeadsKernel>);
  r.add(referenceKey("tfm.merge_heads"), makeKernel<MergeHeadsKernel>);
}

}  // namespace tfmrt
