// tfm.embedding (row gather) and tfm.add_positions.
#include <cstring>

#include "format.h"
#include "kernels/kernel_util.h"
#include "kernels/reference/reference_kernels.h"

namespace tfmrt {
namespace {

class EmbeddingKernel final : public Kernel {
public:
  const char *name() const override { return "reference.embedding"; }
  Status run(const KernelArgs &a) const override {
    const float *table = a.inputs[0].as<float>();
    const int32_t *ids = a.inputs[1].as<int32_t>();
    float *y = a.outputs[0].as<float>();
    const int64_t vocab = a.inputs[0].dim(0), d = a.inputs[0].dim(1);
    const int64_t n = a.inputs[1].numel();
    for (int64_t i = 0; i < n; ++i)
      if (ids[i] < 0 || ids[i] >= vocab)
        return invalidArgument(cat("token id ", ids[i], " at flat position ", i, " of ids ", shapeStr(*a.inputs[1].shape),
                                   " is outside the vocabulary [0, ", vocab, ")"));
#pragma omp parallel for if (n * d >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) std::memcpy(y + i * d, table + int64_t(ids[i]) * d, size_t(d) * sizeof(float));
    return Status::OK();
  }
};

class AddPositionsKernel final : public Kernel {
public:
  const char *name() const override { return "reference.add_positions"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    const float *table = a.inputs[1].as<float>();
    float *y = a.outputs[0].as<float>();
    const int64_t b = a.inputs[0].dim(0), s = a.inputs[0].dim(1), d = a.inputs[0].dim(2);
#pragma omp parallel for collapse(2) if (b * s * d >= kParallelMinElements)
    for (int64_t i = 0; i < b; ++i)
      for (int64_t p = 0; p < s; ++p)
        for (int64_t k = 0; k < d; ++k) y[(i * s + p) * d + k] = x[(i * s + p) * d + k] + table[p * d + k];
    return Status::OK();
  }
};

}  // namespace

void registerReferenceEmbedding(KernelRegistry &r) {
  r.add(referenceKey("tfm.embedding"), makeKernel<EmbeddingKernel>);
  r.add(referenceKey("tfm.add_positions"), makeKernel<AddPositionsKernel>);
}

}  // namespace tfmrt
