// Helpers shared by the AVX-512 attention kernels (attention_avx512.cpp, attention_avx512_bf16.cpp).
// Internal linkage only (an anonymous namespace, as kernels/avx512_exp.h): each including TU gets
// its own copy compiled with its own ISA flags, so no AVX-512 code can be picked by the linker for
// a baseline TU. Include only from TUs compiled with AVX-512 flags, after <immintrin.h>.
#pragma once

#include <cstdint>

#include "kernels/attention/attention.h"

namespace tfmrt {
namespace attention {
namespace {

constexpr float kLog2e = 1.44269504088896340736f;
constexpr int64_t kLanes = 16;

inline int64_t minI(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t maxI(int64_t a, int64_t b) { return a > b ? a : b; }

using avx512::exp2v;

// Pointers into q/k/v (not Params' inline helpers: see the header comment).
struct View {
  const float *q, *k, *v;
  const uint8_t *keep;
  int64_t qW, kW, vW, D;

  View(const Params &p, int64_t b, int64_t h)
      : q(p.q + b * p.sq * p.qWidth + p.qOffset + h * p.headDim),
        k(p.k + b * p.sk * p.kWidth + p.kOffset + h * p.headDim),
        v(p.v + b * p.sk * p.vWidth + p.vOffset + h * p.headDim), keep(p.keep + b * p.sk), qW(p.qWidth),
        kW(p.kWidth), vW(p.vWidth), D(p.headDim) {}
};

// Lanes of query vector `vec` that must not see key j: lane l is query i0 + 16 vec + l, which sees
// j iff j <= i0 + 16 vec + l + shift, i.e. the first (j - i0 - shift - 16 vec) lanes are masked.
inline __mmask16 causalMask(int64_t j, int64_t firstRowLimit, int vec) {
  const int64_t hidden = j - firstRowLimit - int64_t(vec) * kLanes;  // firstRowLimit = i0 + shift
  if (hidden <= 0) return 0;
  if (hidden >= kLanes) return 0xFFFF;
  return __mmask16((1u << hidden) - 1u);
}

// ---- wide path tiles ---------------------------------------------------------------------

// In-register transpose of a 16 x 16 block: r[i][j] -> r[j][i]. Per 128-bit lane L, the unpacks
// and shuffle_ps leave r[4g + c] = column 4L + c of rows 4g .. 4g+3; the two shuffle_f32x4 rounds
// then gather the four row groups of each column.
inline void transpose16(__m512 *r) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 4; ++g) {
    r[4 * g + 0] = _mm512_shuffle_ps(t[4 * g + 0], t[4 * g + 2], 0x44);
    r[4 * g + 1] = _mm512_shuffle_ps(t[4 * g + 0], t[4 * g + 2], 0xEE);
    r[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    r[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  for (int c = 0; c < 4; ++c) {
    t[c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);       // lanes 0, 2 of groups 0, 1
    t[4 + c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xDD);   // lanes 1, 3 of groups 0, 1
    t[8 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
    t[12 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xDD);
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);            // columns 0..3
    r[4 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0x88);   // columns 4..7
    r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xDD);        // columns 8..11
    r[12 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0xDD);  // columns 12..15
  }
}

inline __mmask16 firstLanes(int64_t n) { return n >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u); }

// Qt[d][lane] = c * q[lane][d] for `rows` query rows (row stride qW), zero for padding lanes
// (finite, discarded), 16 x 16 blocks at a time.
template <int NV>
void packQueries(const float *q, int64_t qW, int64_t rows, int64_t D, float c, float *Qt) {
  constexpr int64_t W = NV * kLanes;
  const __m512 vc = _mm512_set1_ps(c);
  for (int v = 0; v < NV; ++v)
    for (int64_t d0 = 0; d0 < D; d0 += kLanes) {
      const __mmask16 cols = firstLanes(D - d0);
      __m512 r[kLanes];
      for (int e = 0; e < kLanes; ++e) {
        const int64_t row = v * kLanes + e;
        r[e] = row < rows ? _mm512_mul_ps(_mm512_maskz_loadu_ps(cols, q + row * qW + d0), vc) : _mm512_setzero_ps();
      }
      transpose16(r);
      for (int64_t e = 0; e < kLanes && d0 + e < D; ++e) _mm512_store_ps(Qt + (d0 + e) * W + v * kLanes, r[e]);
    }
}

// out[r][d] = scale[r] * Ot[d][r] for r < rows (row stride oStride).
template <int NV>
void unpackOutput(const float *Ot, int64_t D, int64_t rows, const float *scale, float *out, int64_t oStride) {
  constexpr int64_t W = NV * kLanes;
  for (int v = 0; v < NV && v * kLanes < rows; ++v)
    for (int64_t d0 = 0; d0 < D; d0 += kLanes) {
      const __mmask16 cols = firstLanes(D - d0);
      __m512 r[kLanes];
      for (int e = 0; e < kLanes; ++e)
        r[e] = d0 + e < D ? _mm512_load_ps(Ot + (d0 + e) * W + v * kLanes) : _mm512_setzero_ps();
      transpose16(r);
      for (int64_t e = 0; e < kLanes && v * kLanes + e < rows; ++e) {
        const int64_t row = v * kLanes + e;
        _mm512_mask_storeu_ps(out + row * oStride + d0, cols, _mm512_mul_ps(r[e], _mm512_set1_ps(scale[row])));
      }
    }
}

inline int64_t roundUp16(int64_t n) { return (n + 15) / 16 * 16; }

// Register-block helpers are forced inline into their noinline per-chunk loops (see the kernels).
#define TFM_INLINE inline __attribute__((always_inline))

// ---- wide path: the online softmax around the two products ---------------------------------

// How many of a tile's ascending visible keys (idx[0, n)) any of its rows [i0, i0 + rows) can see.
inline int64_t visibleKeyCount(const Params &p, int64_t i0, int64_t rows, const int32_t *idx, int64_t n) {
  if (!p.causal) return n;
  const int64_t jEnd = i0 + rows + (p.sk - p.sq);  // p.causalShift(), spelled out (no shared inline code)
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (idx[mid] < jEnd) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// One online-softmax step over the scores St[0, nk)[W] of a chunk whose lane-wise maximum mx
// includes the running max m: replaces the scores by exp2(s - new max) in place, and updates m,
// l and alpha (the factor the output accumulator must be rescaled by).
// Its first half: the new running max m = mx, the base the scores are exponentiated against,
// and alpha = 2^(old m - base).
template <int NV>
TFM_INLINE void newRunningMax(const __m512 *mx, __m512 *m, __m512 *base, __m512 *alpha) {
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  for (int v = 0; v < NV; ++v) {
    // A lane with nothing visible yet keeps max -inf: subtract 0 instead so exp2(-inf) = 0.
    const __mmask16 none = _mm512_cmp_ps_mask(mx[v], ninf, _CMP_EQ_OQ);
    base[v] = _mm512_mask_mov_ps(mx[v], none, _mm512_setzero_ps());
    alpha[v] = exp2v(_mm512_sub_ps(m[v], base[v]));
    m[v] = mx[v];
  }
}

template <int NV>
TFM_INLINE void softmaxChunk(float *St, int nk, const __m512 *mx, __m512 *m, __m512 *l, __m512 *alpha) {
  constexpr int64_t W = NV * kLanes;
  __m512 base[NV], sum[NV];
  newRunningMax<NV>(mx, m, base, alpha);
  for (int v = 0; v < NV; ++v) sum[v] = _mm512_setzero_ps();
  for (int rr = 0; rr < nk; ++rr)
    for (int v = 0; v < NV; ++v) {
      const __m512 pr = exp2v(_mm512_sub_ps(_mm512_load_ps(St + rr * W + v * kLanes), base[v]));
      _mm512_store_ps(St + rr * W + v * kLanes, pr);
      sum[v] = _mm512_add_ps(sum[v], pr);
    }
  for (int v = 0; v < NV; ++v) l[v] = _mm512_fmadd_ps(l[v], alpha[v], sum[v]);
}

// Writes the tile back transposed: normalised by l, or (a key split) unnormalised with m and l.
template <int NV>
void writeTile(const float *Ot, int64_t D, int64_t rows, const __m512 *m, const __m512 *l, const TaskOut &out) {
  constexpr int64_t W = NV * kLanes;
  alignas(64) float scaleOut[W], mOut[W], lOut[W];
  for (int v = 0; v < NV; ++v) {
    _mm512_store_ps(mOut + v * kLanes, m[v]);
    _mm512_store_ps(lOut + v * kLanes, l[v]);
    const __mmask16 pos = _mm512_cmp_ps_mask(l[v], _mm512_setzero_ps(), _CMP_GT_OQ);
    _mm512_store_ps(scaleOut + v * kLanes,
                    out.m ? _mm512_set1_ps(1.0f) : _mm512_maskz_div_ps(pos, _mm512_set1_ps(1.0f), l[v]));
  }
  unpackOutput<NV>(Ot, D, rows, scaleOut, out.o, out.oStride);
  if (out.m)
    for (int64_t r = 0; r < rows; ++r) out.m[r] = mOut[r], out.l[r] = lOut[r];
}

}  // namespace
}  // namespace attention
}  // namespace tfmrt
