// Incremental decoding: tfm.cache_reorder, tfm.cache_write, tfm.add_position_at and the plain
// tfm.cached_attention / tfm.gathered_attention the fast kernels are tested against.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/decode/decode_common.h"
#include "kernels/kernel_util.h"
#include "kernels/reference/reference_kernels.h"

namespace tfmrt {
namespace {

// Gathers in place: row r <- row parents[r] over positions [0, step). Rows that keep their own
// content are skipped; the others go through scratch, a block of positions at a time, so a row
// that is both read and overwritten is read first.
class CacheReorderKernel final : public Kernel {
public:
  static constexpr int64_t kBlock = 16;  // positions per pass
  const char *name() const override { return "reference.cache_reorder"; }
  size_t scratchBytes(const std::vector<const std::vector<int64_t> *> &in, int) const override {
    return size_t((*in[1])[0] * kBlock * (*in[0])[2]) * sizeof(float);
  }
  Status run(const KernelArgs &a) override {
    const int64_t Rc = a.inputs[0].dim(0), Tc = a.inputs[0].dim(1), D = a.inputs[0].dim(2);
    const int64_t R = a.inputs[1].dim(0);
    const int32_t *parents = a.inputs[1].as<int32_t>();
    const int64_t step = *a.inputs[2].as<int32_t>();
    if (step < 0 || step > Tc) return invalidArgument(cat("step ", step, " is outside [0, ", Tc, "]"));
    TFMRT_RETURN_IF_ERROR(decode::checkIndices(a.inputs[1], Rc, "parents"));
    float *cache = a.outputs[0].as<float>();  // the same buffer as the operand
    moved_.clear();
    for (int64_t r = 0; r < R; ++r)
      if (parents[r] != r) moved_.push_back(r);
    if (moved_.empty() || step == 0) return Status::OK();
    if (size_t(R * kBlock * D) * sizeof(float) > a.scratchBytes) return internalError("cache_reorder: scratch too small");
    float *tmp = static_cast<float *>(a.scratch);
    for (int64_t p0 = 0; p0 < step; p0 += kBlock) {
      const int64_t n = std::min(kBlock, step - p0);
      for (size_t i = 0; i < moved_.size(); ++i)
        std::memcpy(tmp + int64_t(i) * kBlock * D, cache + (parents[moved_[i]] * Tc + p0) * D, size_t(n * D) * sizeof(float));
      for (size_t i = 0; i < moved_.size(); ++i)
        std::memcpy(cache + (moved_[i] * Tc + p0) * D, tmp + int64_t(i) * kBlock * D, size_t(n * D) * sizeof(float));
    }
    return Status::OK();
  }

private:
  std::vector<int64_t> moved_;  // reserved once it has grown: no allocation per step
};

class CacheWriteKernel final : public Kernel {
public:
  const char *name() const override { return "reference.cache_write"; }
  Status run(const KernelArgs &a) override {
    const int64_t Tc = a.inputs[0].dim(1), D = a.inputs[0].dim(2), R = a.inputs[1].dim(0);
    int64_t step;
    TFMRT_RETURN_IF_ERROR(decode::readStep(a.inputs[2], Tc, "the cache length", step));
    float *cache = a.outputs[0].as<float>();
    const float *update = a.inputs[1].as<float>();
    for (int64_t r = 0; r < R; ++r) std::memcpy(cache + (r * Tc + step) * D, update + r * D, size_t(D) * sizeof(float));
    return Status::OK();
  }
};

class AddPositionAtKernel final : public Kernel {
public:
  const char *name() const override { return "reference.add_position_at"; }
  Status run(const KernelArgs &a) override {
    const int64_t B = a.inputs[0].dim(0), D = a.inputs[0].dim(2);
    int64_t step;
    TFMRT_RETURN_IF_ERROR(decode::readStep(a.inputs[2], a.inputs[1].dim(0), "the rows of the position table", step));
    const float *x = a.inputs[0].as<float>(), *row = a.inputs[1].as<float>() + step * D;
    float *y = a.outputs[0].as<float>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < D; ++j) y[b * D + j] = x[b * D + j] + row[j];
    return Status::OK();
  }
};

class CachedAttentionKernel final : public Kernel {
public:
  const char *name() const override { return "reference.cached_attention"; }
  Status prepare(const KernelPrepareInfo &info) override {
    attrs_.read(*info.node, false);
    return Status::OK();
  }
  Status run(const KernelArgs &a) override {
    const int64_t R = a.inputs[0].dim(0), Wq = a.inputs[0].dim(2);
    const int64_t Tc = a.inputs[1].dim(1), D = a.inputs[1].dim(2), dk = attrs_.headDim;
    int64_t step;
    TFMRT_RETURN_IF_ERROR(decode::readStep(a.inputs[3], Tc, "the cache length", step));
    scores_.resize(size_t(step + 1));
    for (int64_t r = 0; r < R; ++r)
      for (int64_t h = 0; h < attrs_.heads; ++h)
        decode::attendReference(a.inputs[0].as<float>() + r * Wq + attrs_.qOffset + h * dk,
                                a.inputs[1].as<float>() + r * Tc * D + h * dk, D,
                                a.inputs[2].as<float>() + r * Tc * D + h * dk, D, nullptr, step + 1, dk,
                                attrs_.scale, scores_.data(), a.outputs[0].as<float>() + r * attrs_.heads * dk + h * dk);
    return Status::OK();
  }

private:
  decode::StepAttentionAttrs attrs_;
  std::vector<float> scores_;
};

class GatheredAttentionKernel final : public Kernel {
public:
  const char *name() const override { return "reference.gathered_attention"; }
  Status prepare(const KernelPrepareInfo &info) override {
    attrs_.read(*info.node, true);
    return Status::OK();
  }
  Status run(const KernelArgs &a) override {
    const int64_t R = a.inputs[0].dim(0), Wq = a.inputs[0].dim(2);
    const int64_t N = a.inputs[1].dim(0), S = a.inputs[1].dim(1), Wk = a.inputs[1].dim(2), Wv = a.inputs[2].dim(2);
    const int64_t dk = attrs_.headDim;
    TFMRT_RETURN_IF_ERROR(decode::checkIndices(a.inputs[4], N, "rows"));
    const int32_t *rows = a.inputs[4].as<int32_t>();
    const uint8_t *keep = a.inputs[3].as<uint8_t>();
    scores_.resize(size_t(S));
    for (int64_t r = 0; r < R; ++r) {
      const int64_t n = rows[r];
      for (int64_t h = 0; h < attrs_.heads; ++h)
        decode::attendReference(a.inputs[0].as<float>() + r * Wq + attrs_.qOffset + h * dk,
                                a.inputs[1].as<float>() + n * S * Wk + attrs_.kOffset + h * dk, Wk,
                                a.inputs[2].as<float>() + n * S * Wv + attrs_.vOffset + h * dk, Wv, keep + n * S, S,
                                dk, attrs_.scale, scores_.data(), a.outputs[0].as<float>() + r * attrs_.heads * dk + h * dk);
    }
    return Status::OK();
  }

private:
  decode::StepAttentionAttrs attrs_;
  std::vector<float> scores_;
};

}  // namespace

void registerReferenceDecode(KernelRegistry &r) {
  r.add(referenceKey("tfm.cache_reorder"), makeKernel<CacheReorderKernel>);
  r.add(referenceKey("tfm.cache_write"), makeKernel<CacheWriteKernel>);
  r.add(referenceKey("tfm.add_position_at"), makeKernel<AddPositionAtKernel>);
  r.add(referenceKey("tfm.cached_attention"), makeKernel<CachedAttentionKernel>);
  r.add(referenceKey("tfm.gathered_attention"), makeKernel<GatheredAttentionKernel>);
}

}  // namespace tfmrt
