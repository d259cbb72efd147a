// Shared by the reference and fast kernels of incremental decoding: operand views and the
// data-dependent checks (step, parents, rows) that shape inference cannot make.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <vector>

#include "format.h"
#include "kernel_registry.h"
#include "kernels/gemm/packed_gemm.h"
#include "op_schema.h"
#include "tfmrt/tensor.h"

namespace tfmrt::decode {

// A step operand: one position for every row (a scalar) or one per row ([R]: continuous
// batching, where rows entered the batch at different steps).
struct Steps {
  const int32_t *positions = nullptr;
  bool perRow = false;
  int64_t at(int64_t r) const { return positions[perRow ? r : 0]; }
};

// Reads and checks every position against [0, limit); shape inference has checked the count.
inline Status readSteps(const TensorRef &step, int64_t rows, int64_t limit, const char *what, Steps &out) {
  out.positions = step.as<int32_t>();
  out.perRow = step.rank() == 1;
  const int64_t n = out.perRow ? step.numel() : 1;
  if (out.perRow && n != rows) return invalidArgument(cat("step has ", n, " positions for ", rows, " rows"));
  for (int64_t i = 0; i < n; ++i)
    if (out.positions[i] < 0 || out.positions[i] >= limit)
      return invalidArgument(cat("step ", out.positions[i], out.perRow ? cat(" (row ", i, ")") : std::string(),
                                 " is outside [0, ", limit, ") (", what, ")"));
  return Status::OK();
}

inline Status checkIndices(const TensorRef &t, int64_t limit, const char *what) {
  const int32_t *p = t.as<int32_t>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i)
    if (p[i] < 0 || p[i] >= limit)
      return invalidArgument(cat(what, "[", i, "] = ", p[i], " is outside [0, ", limit, ")"));
  return Status::OK();
}

// n floats -> bf16, rounded to nearest even; with AVX512-BF16 when `avx512Bf16` (the caller
// checked the CPU; that instruction also flushes denormals, which no K/V value is near).
inline void rowToBf16(const float *x, int64_t n, uint16_t *out, bool avx512Bf16) {
  if (avx512Bf16 && n % 2 == 0) return gemm::toBf16PairsAvx512Bf16(x, 1, n, reinterpret_cast<uint32_t *>(out));
  for (int64_t j = 0; j < n; ++j) out[j] = floatToBf16(x[j]);
}

// tfm.cache_write for the reference and fast kernels: row r of the update (columns [offset,
// offset + D)) into the cache at position step[r] (a bf16 cache: rounded to nearest even); rows
// split over the threads when R x D reaches parallelMinFloats (each row's destination is its own,
// so the bytes are the same either way).
inline Status writeCacheRows(const KernelArgs &a, int64_t offset, int64_t parallelMinFloats, bool avx512Bf16 = false) {
  const int64_t Tc = a.inputs[0].dim(1), D = a.inputs[0].dim(2), R = a.inputs[1].dim(0), W = a.inputs[1].dim(2);
  Steps steps;
  TFMRT_RETURN_IF_ERROR(readSteps(a.inputs[2], R, Tc, "the cache length", steps));
  const float *update = a.inputs[1].as<float>() + offset;
  if (a.outputs[0].dtype == DType::BF16) {
    uint16_t *cache = a.outputs[0].as<uint16_t>();
#pragma omp parallel for schedule(static) if (R * D >= parallelMinFloats)
    for (int64_t r = 0; r < R; ++r) rowToBf16(update + r * W, D, cache + (r * Tc + steps.at(r)) * D, avx512Bf16);
    return Status::OK();
  }
  float *cache = a.outputs[0].as<float>();
#pragma omp parallel for schedule(static) if (R * D >= parallelMinFloats)
  for (int64_t r = 0; r < R; ++r)
    std::memcpy(cache + (r * Tc + steps.at(r)) * D, update + r * W, size_t(D) * sizeof(float));
  return Status::OK();
}

// tfm.cache_reorder's plan, shared by the reference and fast kernels: row r <- row parents[r]
// over positions [0, step[r]). Rows that keep their own content, or have no positions yet, are
// not `moved`. A source row that is itself overwritten is `saved` to scratch first (a block of
// kBlock positions at a time, slot[p] its place there); every other source is read straight from
// the cache. Vectors are reserved once they have grown: no allocation per step.
struct ReorderPlan {
  static constexpr int64_t kBlock = 16;  // positions per pass
  std::vector<int64_t> moved, saved, slot;
  std::vector<uint8_t> overwritten;
  int64_t longest = 0;  // the longest copy
  // The call's operands (set by begin); `D` counts elements of `elem` bytes (f32 or bf16).
  int64_t Tc = 0, D = 0;
  size_t elem = sizeof(float);
  const int32_t *parents = nullptr;
  Steps steps;
  uint8_t *cache = nullptr, *tmp = nullptr;

  static size_t scratchBytes(const std::vector<const std::vector<int64_t> *> &in) {
    return size_t((*in[1])[0] * kBlock * (*in[0])[2]) * sizeof(float);  // parents x block x D (f32: the larger)
  }
  // Reads and checks the operands and plans the copies (none when `moved` is empty).
  Status begin(const KernelArgs &a) {
    const int64_t Rc = a.inputs[0].dim(0), R = a.inputs[1].dim(0);
    Tc = a.inputs[0].dim(1), D = a.inputs[0].dim(2);
    elem = dtypeSize(a.outputs[0].dtype);
    parents = a.inputs[1].as<int32_t>();
    TFMRT_RETURN_IF_ERROR(readSteps(a.inputs[2], R, Tc + 1, "the cache length", steps));
    TFMRT_RETURN_IF_ERROR(checkIndices(a.inputs[1], Rc, "parents"));
    cache = a.outputs[0].as<uint8_t>();  // the same buffer as the operand
    tmp = static_cast<uint8_t *>(a.scratch);
    moved.clear();
    overwritten.assign(size_t(Rc), 0);
    longest = 0;
    for (int64_t r = 0; r < R; ++r)
      if (parents[r] != r && steps.at(r) > 0) {
        moved.push_back(r), overwritten[size_t(r)] = 1;
        longest = std::max<int64_t>(longest, steps.at(r));
      }
    saved.clear();
    slot.assign(size_t(Rc), -1);
    for (int64_t r : moved) {
      const int32_t p = parents[r];
      if (overwritten[size_t(p)] && slot[size_t(p)] < 0) {
        slot[size_t(p)] = int64_t(saved.size());
        saved.push_back(p);
      }
    }
    if (size_t(int64_t(saved.size()) * kBlock * D) * elem > a.scratchBytes)
      return internalError("cache_reorder: scratch too small");
    return Status::OK();
  }
  // Saves positions [p0, p0 + n) of saved row i to scratch.
  void save(size_t i, int64_t p0, int64_t n) const {
    std::memcpy(tmp + size_t(int64_t(i) * kBlock * D) * elem, cache + size_t((saved[i] * Tc + p0) * D) * elem,
                size_t(n * D) * elem);
  }
  // Copies positions [p0, p0 + n) into moved row moved[i] (clipped to its own length).
  void copy(size_t i, int64_t p0, int64_t n) const {
    const int64_t r = moved[i], rn = std::min(n, steps.at(r) - p0);
    if (rn <= 0) return;
    const int32_t p = parents[r];
    const uint8_t *src = slot[size_t(p)] >= 0 ? tmp + size_t(slot[size_t(p)] * kBlock * D) * elem
                                              : cache + size_t((p * Tc + p0) * D) * elem;
    std::memcpy(cache + size_t((r * Tc + p0) * D) * elem, src, size_t(rn * D) * elem);
  }
};

// Attention of one query row: attrs shared by cached_attention and gathered_attention.
struct StepAttentionAttrs {
  int64_t heads = 0, headDim = 0, qOffset = 0, kOffset = 0, vOffset = 0;
  float scale = 1;
  void read(const Node &node, bool gathered) {
    heads = attrInt(node, "heads");
    headDim = attrInt(node, "head_dim");
    qOffset = attrInt(node, "q_offset");
    if (gathered) {
      kOffset = attrInt(node, "k_offset");
      vOffset = attrInt(node, "v_offset");
    }
    scale = float(attrFloat(node, "scale"));
  }
};

// A K/V element as f32: f32 as is, bf16 (uint16_t) widened exactly.
inline float kvFloat(float x) { return x; }
inline float kvFloat(uint16_t x) { return bf16ToFloat(x); }

// One (query row, head): keys at `k + p * kStride`, values at `v + p * vStride` (f32, or bf16
// as uint16_t), for the positions p < n with keep[p] (keep null: all). `scores` holds n floats.
// Written for clarity; the fast kernels have the same structure with vectorised loops and run
// (row, head) pairs in parallel.
template <typename KV>
void attendReference(const float *q, const KV *k, int64_t kStride, const KV *v, int64_t vStride, const uint8_t *keep,
                     int64_t n, int64_t dk, float scale, float *scores, float *out) {
  float mx = -1e30f;
  bool any = false;
  for (int64_t p = 0; p < n; ++p) {
    if (keep && !keep[p]) continue;
    float s = 0;
    for (int64_t j = 0; j < dk; ++j) s += q[j] * kvFloat(k[p * kStride + j]);
    scores[p] = s * scale;
    if (scores[p] > mx) mx = scores[p];
    any = true;
  }
  for (int64_t j = 0; j < dk; ++j) out[j] = 0;
  if (!any) return;  // a fully masked row gives zeros, as tfm.fused_attention
  double sum = 0;
  for (int64_t p = 0; p < n; ++p) {
    if (keep && !keep[p]) continue;
    scores[p] = std::exp(scores[p] - mx);
    sum += scores[p];
  }
  for (int64_t p = 0; p < n; ++p) {
    if (keep && !keep[p]) continue;
    const float w = float(scores[p] / sum);
    for (int64_t j = 0; j < dk; ++j) out[j] += w * kvFloat(v[p * vStride + j]);
  }
}

// tfm.attention_weights for one query row: out[p] = mean over heads h of softmax(q_h k_h^T *
// scale)[p] over the keys p < n with keep[p] (masked keys 0; a fully masked row all zeros). Head
// h of q at q + h * dk, of key p at k + p * kStride + h * dk. `scores` holds n floats. Written for
// clarity; the AVX-512 body (attentionWeightsAllHeads64Avx512) does the same 16 keys at a time.
template <typename KV>
void attentionWeightsReference(const float *q, const KV *k, int64_t kStride, const uint8_t *keep, int64_t n,
                               int64_t heads, int64_t dk, float scale, float *scores, float *out) {
  for (int64_t p = 0; p < n; ++p) out[p] = 0;
  for (int64_t h = 0; h < heads; ++h) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t p = 0; p < n; ++p) {
      if (!keep[p]) continue;
      const KV *kp = k + p * kStride + h * dk;
      float s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j < dk; ++j) s += q[h * dk + j] * kvFloat(kp[j]);
      scores[p] = s * scale;
      mx = std::max(mx, scores[p]);
    }
    if (mx == -std::numeric_limits<float>::infinity()) return;  // fully masked: zeros
    double sum = 0;
    for (int64_t p = 0; p < n; ++p)
      if (keep[p]) sum += (scores[p] = std::exp(scores[p] - mx));
    const float weight = float(1.0 / (sum * double(heads)));
    for (int64_t p = 0; p < n; ++p)
      if (keep[p]) out[p] += scores[p] * weight;
  }
}

}  // namespace tfmrt::decode
