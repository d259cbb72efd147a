// Incremental decoding: tfm.cache_reorder, tfm.cache_write, tfm.add_position_at and the plain
// tfm.cached_attention / tfm.gathered_attention the fast kernels are tested against, and
// tfm.attention_weights.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/decode/decode_common.h"
#include "kernels/kernel_util.h"
#include "kernels/reference/reference_kernels.h"

namespace tfmrt {
namespace {

// Gathers in place along decode::ReorderPlan, one copy after another.
class CacheReorderKernel final : public Kernel {
public:
  const char *name() const override { return "reference.cache_reorder"; }
  size_t scratchBytes(const std::vector<const std::vector<int64_t> *> &in, int) const override {
    return decode::ReorderPlan::scratchBytes(in);
  }
  Status run(const KernelArgs &a) const override {
    decode::ReorderPlan plan;
    TFMRT_RETURN_IF_ERROR(plan.begin(a));
    for (int64_t p0 = 0; p0 < plan.longest; p0 += decode::ReorderPlan::kBlock) {
      const int64_t n = std::min(decode::ReorderPlan::kBlock, plan.longest - p0);
      for (size_t i = 0; i < plan.saved.size(); ++i) plan.save(i, p0, n);
      for (size_t i = 0; i < plan.moved.size(); ++i) plan.copy(i, p0, n);
    }
    return Status::OK();
  }
};

class CacheWriteKernel final : public Kernel {
public:
  const char *name() const override { return "reference.cache_write"; }
  Status run(const KernelArgs &a) const override {  // one row after another
    return decode::writeCacheRows(a, offset_, std::numeric_limits<int64_t>::max());
  }
  Status prepare(const KernelPrepareInfo &info) override {
    offset_ = attrInt(*info.node, "update_offset");
    return Status::OK();
  }

private:
  int64_t offset_ = 0;
};

class AddPositionAtKernel final : public Kernel {
public:
  const char *name() const override { return "reference.add_position_at"; }
  Status run(const KernelArgs &a) const override {
    const int64_t B = a.inputs[0].dim(0), D = a.inputs[0].dim(2);
    decode::Steps steps;
    TFMRT_RETURN_IF_ERROR(decode::readSteps(a.inputs[2], B, a.inputs[1].dim(0), "the rows of the position table", steps));
    const float *x = a.inputs[0].as<float>();
    float *y = a.outputs[0].as<float>();
    for (int64_t b = 0; b < B; ++b) {
      const float *row = a.inputs[1].as<float>() + steps.at(b) * D;
      for (int64_t j = 0; j < D; ++j) y[b * D + j] = x[b * D + j] + row[j];
    }
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
  Status run(const KernelArgs &a) const override {
    const int64_t R = a.inputs[0].dim(0), Wq = a.inputs[0].dim(2);
    const int64_t Tc = a.inputs[1].dim(1), D = a.inputs[1].dim(2), dk = attrs_.headDim;
    decode::Steps steps;
    TFMRT_RETURN_IF_ERROR(decode::readSteps(a.inputs[3], R, Tc, "the cache length", steps));
    std::vector<float> scores(static_cast<size_t>(Tc));
    if (a.inputs[1].dtype == DType::BF16) return run<uint16_t>(a, R, Wq, Tc, D, dk, steps, scores.data());
    return run<float>(a, R, Wq, Tc, D, dk, steps, scores.data());
  }

private:
  template <typename KV>
  Status run(const KernelArgs &a, int64_t R, int64_t Wq, int64_t Tc, int64_t D, int64_t dk, const decode::Steps &steps,
             float *scores) const {
    for (int64_t r = 0; r < R; ++r)
      for (int64_t h = 0; h < attrs_.heads; ++h)
        decode::attendReference(a.inputs[0].as<float>() + r * Wq + attrs_.qOffset + h * dk,
                                a.inputs[1].as<KV>() + r * Tc * D + h * dk, D,
                                a.inputs[2].as<KV>() + r * Tc * D + h * dk, D, nullptr, steps.at(r) + 1, dk,
                                attrs_.scale, scores, a.outputs[0].as<float>() + r * attrs_.heads * dk + h * dk);
    return Status::OK();
  }

  decode::StepAttentionAttrs attrs_;
};

class GatheredAttentionKernel final : public Kernel {
public:
  const char *name() const override { return "reference.gathered_attention"; }
  Status prepare(const KernelPrepareInfo &info) override {
    attrs_.read(*info.node, true);
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const int64_t R = a.inputs[0].dim(0), Wq = a.inputs[0].dim(2);
    const int64_t N = a.inputs[1].dim(0), S = a.inputs[1].dim(1), Wk = a.inputs[1].dim(2), Wv = a.inputs[2].dim(2);
    const int64_t dk = attrs_.headDim;
    TFMRT_RETURN_IF_ERROR(decode::checkIndices(a.inputs[4], N, "rows"));
    const int32_t *rows = a.inputs[4].as<int32_t>();
    const uint8_t *keep = a.inputs[3].as<uint8_t>();
    std::vector<float> scores(static_cast<size_t>(S));
    if (a.inputs[1].dtype == DType::BF16) return run<uint16_t>(a, R, Wq, S, Wk, Wv, dk, rows, keep, scores.data());
    return run<float>(a, R, Wq, S, Wk, Wv, dk, rows, keep, scores.data());
  }

private:
  template <typename KV>
  Status run(const KernelArgs &a, int64_t R, int64_t Wq, int64_t S, int64_t Wk, int64_t Wv, int64_t dk,
             const int32_t *rows, const uint8_t *keep, float *scores) const {
    for (int64_t r = 0; r < R; ++r) {
      const int64_t n = rows[r];
      for (int64_t h = 0; h < attrs_.heads; ++h)
        decode::attendReference(a.inputs[0].as<float>() + r * Wq + attrs_.qOffset + h * dk,
                                a.inputs[1].as<KV>() + n * S * Wk + attrs_.kOffset + h * dk, Wk,
                                a.inputs[2].as<KV>() + n * S * Wv + attrs_.vOffset + h * dk, Wv, keep + n * S, S,
                                dk, attrs_.scale, scores, a.outputs[0].as<float>() + r * attrs_.heads * dk + h * dk);
    }
    return Status::OK();
  }

  decode::StepAttentionAttrs attrs_;
};

// tfm.attention_weights: per query row, the heads' softmax weights over its sentence's kept keys,
// averaged over the heads (the translator's word alignment); rows in parallel.
class AttentionWeightsKernel final : public Kernel {
public:
  const char *name() const override { return "reference.attention_weights"; }
  Status prepare(const KernelPrepareInfo &info) override {
    attrs_.read(*info.node, true);
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const int64_t N = a.inputs[1].dim(0);
    TFMRT_RETURN_IF_ERROR(decode::checkIndices(a.inputs[3], N, "rows"));
    if (a.inputs[1].dtype == DType::BF16) return run<uint16_t>(a);
    return run<float>(a);
  }

private:
  template <typename KV>
  Status run(const KernelArgs &a) const {
    const int64_t R = a.inputs[0].dim(0), Wq = a.inputs[0].dim(2);
    const int64_t S = a.inputs[1].dim(1), Wk = a.inputs[1].dim(2), dk = attrs_.headDim, H = attrs_.heads;
    const int32_t *rows = a.inputs[3].as<int32_t>();
    const uint8_t *keep = a.inputs[2].as<uint8_t>();
    const float *q = a.inputs[0].as<float>();
    const KV *k = a.inputs[1].as<KV>();
    float *y = a.outputs[0].as<float>();
#pragma omp parallel for schedule(static) if (R * S * H * dk >= (int64_t(1) << 16))
    for (int64_t r = 0; r < R; ++r) {
      thread_local std::vector<float> scoresOfThread;  // sessions on several threads may run this at once
      std::vector<float> &scores = scoresOfThread;
      scores.resize(size_t(S));
      const int64_t n = rows[r];
      decode::attentionWeightsReference(q + r * Wq + attrs_.qOffset, k + n * S * Wk + attrs_.kOffset, Wk, keep + n * S,
                                        S, H, dk, attrs_.scale, scores.data(), y + r * S);
    }
    return Status::OK();
  }

  decode::StepAttentionAttrs attrs_;
};

// f32 -> bf16 (nearest even), one element after another.
class ToBf16Kernel final : public Kernel {
public:
  const char *name() const override { return "reference.to_bf16"; }
  Status run(const KernelArgs &a) const override {
    const float *x = a.inputs[0].as<float>();
    uint16_t *y = a.outputs[0].as<uint16_t>();
    for (int64_t i = 0, n = a.inputs[0].numel(); i < n; ++i) y[i] = floatToBf16(x[i]);
    return Status::OK();
  }
};

}  // namespace

void registerReferenceDecode(KernelRegistry &r) {
  // A bf16 cache (tfm-lower-kv-precision): the key's dtype is the first operand's, the cache.
  r.add(referenceKey("tfm.cache_reorder", DType::BF16), makeKernel<CacheReorderKernel>);
  r.add(referenceKey("tfm.cache_write", DType::BF16), makeKernel<CacheWriteKernel>);
  r.add(referenceKey("tfm.to_bf16"), makeKernel<ToBf16Kernel>);
  r.add(referenceKey("tfm.cache_reorder"), makeKernel<CacheReorderKernel>);
  r.add(referenceKey("tfm.cache_write"), makeKernel<CacheWriteKernel>);
  r.add(referenceKey("tfm.add_position_at"), makeKernel<AddPositionAtKernel>);
  r.add(referenceKey("tfm.cached_attention"), makeKernel<CachedAttentionKernel>);
  r.add(referenceKey("tfm.gathered_attention"), makeKernel<GatheredAttentionKernel>);
  r.add(referenceKey("tfm.attention_weights"), makeKernel<AttentionWeightsKernel>);
}

}  // namespace tfmrt
