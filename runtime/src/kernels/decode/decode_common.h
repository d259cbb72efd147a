// Shared by the reference and fast kernels of incremental decoding: operand views and the
// data-dependent checks (step, parents, rows) that shape inference cannot make.
#pragma once

#include <cmath>
#include <cstdint>

#include "format.h"
#include "kernel_registry.h"
#include "op_schema.h"

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

// One (query row, head): keys at `k + p * kStride`, values at `v + p * vStride`, for the
// positions p < n with keep[p] (keep null: all). `scores` holds n floats. Written for clarity; the
// fast kernels have the same structure with vectorised loops and run (row, head) pairs in parallel.
inline void attendReference(const float *q, const float *k, int64_t kStride, const float *v, int64_t vStride,
                            const uint8_t *keep, int64_t n, int64_t dk, float scale, float *scores, float *out) {
  float mx = -1e30f;
  bool any = false;
  for (int64_t p = 0; p < n; ++p) {
    if (keep && !keep[p]) continue;
    float s = 0;
    for (int64_t j = 0; j < dk; ++j) s += q[j] * k[p * kStride + j];
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
    for (int64_t j = 0; j < dk; ++j) out[j] += w * v[p * vStride + j];
  }
}

}  // namespace tfmrt::decode
