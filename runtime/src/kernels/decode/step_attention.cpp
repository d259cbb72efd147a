// Fast one-query-row attention kernels for decode_step, tested against the reference kernels
// (kernels/reference/decode.cpp). Keys and values are f32 or bf16 (tfm-lower-kv-precision). Work items are rows (head_dim 64 on AVX-512 or AVX2: all heads of a row
// at once, each key and value row read once, in order) or else (row, head) pairs; each thread
// keeps its scores in the plan's scratch.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/decode/decode_common.h"
#include "kernels/decode/step_attention.h"
#include "kernels/kernel_util.h"

namespace tfmrt {
namespace {

using AttendFn = void (*)(const float *, const float *, int64_t, const float *, int64_t, const uint8_t *, int64_t,
                          int64_t, float, float *, float *);
using AttendAllHeadsFn = void (*)(const float *, const float *, int64_t, const float *, int64_t, const uint8_t *,
                                  int64_t, int64_t, float, float *, float *);
using AttendAllHeadsBf16Fn = void (*)(const float *, const uint16_t *, int64_t, const uint16_t *, int64_t,
                                      const uint8_t *, int64_t, int64_t, float, float *, float *);
using AttendBf16Fn = AttendAllHeadsBf16Fn;  // the same signature, dk instead of heads

class StepAttentionBase : public Kernel {
public:
  explicit StepAttentionBase(bool gathered) : gathered_(gathered) {}
  const char *name() const override {
    static const char *const names[2][3] = {
        {"fast.cached_attention_avx512", "fast.cached_attention_avx2", "fast.cached_attention_portable"},
        {"fast.gathered_attention_avx512", "fast.gathered_attention_avx2", "fast.gathered_attention_portable"}};
    return names[gathered_ ? 1 : 0][avx512_ ? 0 : avx2_ ? 1 : 2];
  }
  Status prepare(const KernelPrepareInfo &info) override {
    attrs_.read(*info.node, gathered_);
    avx512_ = attention::cpuHasAvx512() && attrs_.headDim % 16 == 0;
    avx2_ = !avx512_ && attention::cpuHasAvx2Fma() && attrs_.headDim % 8 == 0;
    attend_ = avx512_ ? decode::attendAvx512 : avx2_ ? decode::attendAvx2 : decode::attendReference<float>;
    attendBf16_ = avx512_ ? decode::attendAvx512Bf16 : avx2_ ? decode::attendAvx2Bf16 : decode::attendReference<uint16_t>;
    const bool allHeads = (avx512_ || avx2_) && attrs_.headDim == 64 && attrs_.heads <= 64;
    attendAllHeads_ = !allHeads ? nullptr : avx512_ ? decode::attendAllHeads64Avx512 : decode::attendAllHeads64Avx2;
    allHeads_ = attendAllHeads_ != nullptr;
    attendAllHeadsBf16_ = !allHeads ? nullptr : avx512_ ? decode::attendAllHeads64Avx512Bf16 : decode::attendAllHeads64Avx2Bf16;
    return Status::OK();
  }
  size_t scratchBytes(const std::vector<const std::vector<int64_t> *> &in, int threads) const override {
    return size_t(std::max(threads, 1)) * size_t(scoresPerThread((*in[1])[1])) * sizeof(float);  // keys per row
  }

protected:
  // Enough for the all-heads bodies and the per-pair ones.
  int64_t scoresPerThread(int64_t keys) const { return (allHeads_ ? attrs_.heads : 1) * (keys + 16); }

  // All heads of each row (allHeads_); `site(r, ...)` runs one row.
  template <typename Site>
  Status runRows(const KernelArgs &a, int64_t R, int64_t keys, Site site) const {
    const int64_t stride = scoresPerThread(keys);
    const int threads = omp_get_max_threads();
    if (size_t(threads) * size_t(stride) * sizeof(float) > a.scratchBytes)
      return internalError("step attention: scratch too small");
    float *scratch = static_cast<float *>(a.scratch);
    const int64_t work = R * attrs_.heads * keys * attrs_.headDim;
#pragma omp parallel for schedule(static) if (work >= kParallelMinElements)
    for (int64_t r = 0; r < R; ++r) site(r, scratch + int64_t(omp_get_thread_num()) * stride);
    return Status::OK();
  }

  // Per sentence n of key_keep [N, S], the keys up to its last kept one. Keys past it are not
  // read: the translator's slot memory is as long as the longest source of the whole call (40
  // tokens or more on test_2016, whose sources average 17), and every row read all of them.
  // Masked keys weigh exactly 0, so the result is unchanged to the bit (tested). One scan per
  // slot, not per row (a beam's rows share a slot) or per (row, head). Per calling thread, not
  // per kernel: sessions on several threads may run a kernel at once (callers keep the returned
  // reference, so their parallel rows read this thread's vector, not their own).
  static const std::vector<int64_t> &keysToLastKept(const uint8_t *keep, int64_t N, int64_t S) {
    thread_local std::vector<int64_t> liveKeysOfThread;
    std::vector<int64_t> &liveKeys = liveKeysOfThread;
    liveKeys.resize(size_t(N));
    for (int64_t n = 0; n < N; ++n) {
      int64_t len = S;
      while (len > 0 && !keep[n * S + len - 1]) --len;
      liveKeys[size_t(n)] = len;
    }
    return liveKeys;
  }

  // Runs rows x heads pairs; `site(r, h, ...)` gives the operands of one pair.
  template <typename Site>
  Status runPairs(const KernelArgs &a, int64_t R, int64_t keys, Site site) const {
    const int64_t pairs = R * attrs_.heads, stride = scoresPerThread(keys);
    const int threads = omp_get_max_threads();
    if (size_t(threads) * size_t(stride) * sizeof(float) > a.scratchBytes)
      return internalError("step attention: scratch too small");
    float *scratch = static_cast<float *>(a.scratch);
    const int64_t work = pairs * keys * attrs_.headDim;
#pragma omp parallel for schedule(static) if (work >= kParallelMinElements)
    for (int64_t i = 0; i < pairs; ++i) {
      float *scores = scratch + int64_t(omp_get_thread_num()) * stride;
      site(i / attrs_.heads, i % attrs_.heads, scores);
    }
    return Status::OK();
  }

  decode::StepAttentionAttrs attrs_;
  AttendFn attend_ = decode::attendReference<float>;
  AttendBf16Fn attendBf16_ = decode::attendReference<uint16_t>;
  AttendAllHeadsFn attendAllHeads_ = nullptr;  // head_dim 64 on AVX-512 or AVX2
  AttendAllHeadsBf16Fn attendAllHeadsBf16_ = nullptr;  // the same bodies for bf16 keys and values
  bool allHeads_ = false;

private:
  bool gathered_;
  bool avx512_ = false, avx2_ = false;
};

class FastCachedAttention final : public StepAttentionBase {
public:
  FastCachedAttention() : StepAttentionBase(false) {}
  Status run(const KernelArgs &a) const override {
    const int64_t R = a.inputs[0].dim(0), Wq = a.inputs[0].dim(2);
    const int64_t Tc = a.inputs[1].dim(1), D = a.inputs[1].dim(2), dk = attrs_.headDim, H = attrs_.heads;
    decode::Steps steps;
    TFMRT_RETURN_IF_ERROR(decode::readSteps(a.inputs[3], R, Tc, "the cache length", steps));
    int64_t keys = 0;  // the most keys of any row: the parallel loop's work estimate
    for (int64_t r = 0; r < (steps.perRow ? R : 1); ++r) keys = std::max(keys, steps.at(r) + 1);
    const float *q = a.inputs[0].as<float>(), *k = a.inputs[1].as<float>(), *v = a.inputs[2].as<float>();
    float *y = a.outputs[0].as<float>();
    if (a.inputs[1].dtype == DType::BF16) {  // a bf16 cache: the all-heads body, else per pair
      const uint16_t *kb = a.inputs[1].as<uint16_t>(), *vb = a.inputs[2].as<uint16_t>();
      if (attendAllHeadsBf16_)
        return runRows(a, R, keys, [&](int64_t r, float *scores) {
          attendAllHeadsBf16_(q + r * Wq + attrs_.qOffset, kb + r * Tc * D, D, vb + r * Tc * D, D,
                                             nullptr, steps.at(r) + 1, H, attrs_.scale, scores, y + r * H * dk);
        });
      return runPairs(a, R, keys, [&](int64_t r, int64_t h, float *scores) {
        attendBf16_(q + r * Wq + attrs_.qOffset + h * dk, kb + r * Tc * D + h * dk, D,
                                vb + r * Tc * D + h * dk, D, nullptr, steps.at(r) + 1, dk, attrs_.scale, scores,
                                y + (r * H + h) * dk);
      });
    }
    if (allHeads_)
      return runRows(a, R, keys, [&](int64_t r, float *scores) {
        attendAllHeads_(q + r * Wq + attrs_.qOffset, k + r * Tc * D, D, v + r * Tc * D, D, nullptr,
                                       steps.at(r) + 1, H, attrs_.scale, scores, y + r * H * dk);
      });
    return runPairs(a, R, keys, [&](int64_t r, int64_t h, float *scores) {
      attend_(q + r * Wq + attrs_.qOffset + h * dk, k + r * Tc * D + h * dk, D, v + r * Tc * D + h * dk, D, nullptr,
              steps.at(r) + 1, dk, attrs_.scale, scores, y + (r * H + h) * dk);
    });
  }
};

class FastGatheredAttention final : public StepAttentionBase {
public:
  FastGatheredAttention() : StepAttentionBase(true) {}
  Status run(const KernelArgs &a) const override {
    const int64_t R = a.inputs[0].dim(0), Wq = a.inputs[0].dim(2);
    const int64_t N = a.inputs[1].dim(0), S = a.inputs[1].dim(1), Wk = a.inputs[1].dim(2), Wv = a.inputs[2].dim(2);
    const int64_t dk = attrs_.headDim, H = attrs_.heads;
    TFMRT_RETURN_IF_ERROR(decode::checkIndices(a.inputs[4], N, "rows"));
    const int32_t *rows = a.inputs[4].as<int32_t>();
    const uint8_t *keep = a.inputs[3].as<uint8_t>();
    const float *q = a.inputs[0].as<float>(), *k = a.inputs[1].as<float>(), *v = a.inputs[2].as<float>();
    float *y = a.outputs[0].as<float>();
    const std::vector<int64_t> &liveKeys = keysToLastKept(keep, N, S);
    if (a.inputs[1].dtype == DType::BF16) {  // bf16 cross K/V: the all-heads body, else per pair
      const uint16_t *kb = a.inputs[1].as<uint16_t>(), *vb = a.inputs[2].as<uint16_t>();
      if (attendAllHeadsBf16_)
        return runRows(a, R, S, [&](int64_t r, float *scores) {
          const int64_t n = rows[r];
          attendAllHeadsBf16_(q + r * Wq + attrs_.qOffset, kb + n * S * Wk + attrs_.kOffset, Wk,
                                             vb + n * S * Wv + attrs_.vOffset, Wv, keep + n * S, liveKeys[size_t(n)],
                                             H, attrs_.scale, scores, y + r * H * dk);
        });
      return runPairs(a, R, S, [&](int64_t r, int64_t h, float *scores) {
        const int64_t n = rows[r];
        attendBf16_(q + r * Wq + attrs_.qOffset + h * dk, kb + n * S * Wk + attrs_.kOffset + h * dk, Wk,
                                vb + n * S * Wv + attrs_.vOffset + h * dk, Wv, keep + n * S, liveKeys[size_t(n)], dk,
                                attrs_.scale, scores, y + (r * H + h) * dk);
      });
    }
    if (allHeads_)
      return runRows(a, R, S, [&](int64_t r, float *scores) {
        const int64_t n = rows[r];
        attendAllHeads_(q + r * Wq + attrs_.qOffset, k + n * S * Wk + attrs_.kOffset, Wk,
                        v + n * S * Wv + attrs_.vOffset, Wv, keep + n * S, liveKeys[size_t(n)], H, attrs_.scale,
                        scores, y + r * H * dk);
      });
    return runPairs(a, R, S, [&](int64_t r, int64_t h, float *scores) {
      const int64_t n = rows[r];
      attend_(q + r * Wq + attrs_.qOffset + h * dk, k + n * S * Wk + attrs_.kOffset + h * dk, Wk,
              v + n * S * Wv + attrs_.vOffset + h * dk, Wv, keep + n * S, liveKeys[size_t(n)], dk, attrs_.scale,
              scores, y + (r * H + h) * dk);
    });
  }
};

// tfm.attention_weights (the translator's alignment) on the gathered attention's frame: rows in
// parallel, keys past a sentence's last kept one not read (their weights are 0), the AVX-512
// all-heads body for head_dim 64, else the reference loops.
class FastAttentionWeights final : public StepAttentionBase {
public:
  FastAttentionWeights() : StepAttentionBase(true) {}
  const char *name() const override { return allHeads_ ? "fast.attention_weights_avx512" : "fast.attention_weights_portable"; }
  Status prepare(const KernelPrepareInfo &info) override {
    TFMRT_RETURN_IF_ERROR(StepAttentionBase::prepare(info));
    // scoresPerThread() sizes heads x (keys + 16) floats when allHeads_.
    allHeads_ = attention::cpuHasAvx512() && attrs_.headDim == 64 && attrs_.heads <= 64;
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const int64_t R = a.inputs[0].dim(0), Wq = a.inputs[0].dim(2);
    const int64_t N = a.inputs[1].dim(0), S = a.inputs[1].dim(1), Wk = a.inputs[1].dim(2);
    TFMRT_RETURN_IF_ERROR(decode::checkIndices(a.inputs[3], N, "rows"));
    const int32_t *rows = a.inputs[3].as<int32_t>();
    const uint8_t *keep = a.inputs[2].as<uint8_t>();
    const float *q = a.inputs[0].as<float>();
    float *y = a.outputs[0].as<float>();
    const std::vector<int64_t> &liveKeys = keysToLastKept(keep, N, S);  // keys past them weigh 0
    auto row = [&](const auto *k, auto body) {
      return runRows(a, R, S, [&](int64_t r, float *scores) {
        const int64_t n = rows[r], live = liveKeys[size_t(n)];
        float *out = y + r * S;
        body(q + r * Wq + attrs_.qOffset, k + n * S * Wk + attrs_.kOffset, keep + n * S, live, scores, out);
        for (int64_t p = live; p < S; ++p) out[p] = 0;
      });
    };
    const int64_t H = attrs_.heads, dk = attrs_.headDim;
    const float scale = attrs_.scale;
    if (a.inputs[1].dtype == DType::BF16)
      return row(a.inputs[1].as<uint16_t>(), [&](const float *qr, const uint16_t *kr, const uint8_t *kp, int64_t n,
                                                   float *scores, float *out) {
        if (allHeads_) decode::attentionWeightsAllHeads64Avx512Bf16(qr, kr, Wk, kp, n, H, scale, scores, out);
        else decode::attentionWeightsReference(qr, kr, Wk, kp, n, H, dk, scale, scores, out);
      });
    return row(a.inputs[1].as<float>(), [&](const float *qr, const float *kr, const uint8_t *kp, int64_t n, float *scores,
                                            float *out) {
      if (allHeads_) decode::attentionWeightsAllHeads64Avx512(qr, kr, Wk, kp, n, H, scale, scores, out);
      else decode::attentionWeightsReference(qr, kr, Wk, kp, n, H, dk, scale, scores, out);
    });
  }
};

KernelKey fastKey(const char *op) { return {op, DType::F32, Layout::Plain, KernelBackend::Dnnl}; }

}  // namespace

void registerFastStepAttention(KernelRegistry &r) {
  r.add(fastKey("tfm.cached_attention"), makeKernel<FastCachedAttention>);
  r.add(fastKey("tfm.gathered_attention"), makeKernel<FastGatheredAttention>);
  r.add(fastKey("tfm.attention_weights"), makeKernel<FastAttentionWeights>);
}

}  // namespace tfmrt
