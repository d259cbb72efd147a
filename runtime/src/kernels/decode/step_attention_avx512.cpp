// AVX-512 body of the one-query-row attention (see step_attention.h); the all-heads body also
// for bf16 keys and values (widened to f32 as they are loaded).
//
// Three passes over the row's keys: dot products (two accumulators per key, one horizontal sum),
// the softmax numerators 16 keys at a time (exp2 polynomial, as the flash kernel's), then the
// weighted sum of V rows with one accumulator per 16 output columns, each V row read once and in
// order. Per-key std::exp and a V loop per 16-column chunk made this kernel 15-20 % of a beam-4
// decoder step.
//
// GCC 12 warns about _mm512_undefined_ps() inside its own masked intrinsics (a known false
// positive of -Wmaybe-uninitialized in avx512fintrin.h).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/avx512_exp.h"
#include "kernels/decode/step_attention.h"

namespace tfmrt::decode {
namespace {

constexpr float kLog2e = 1.44269504088896340736f;

using avx512::exp2v;

// Lane j of the result = the sum of the 16 lanes of v[j]: 16 dot products finished together
// (45 shuffles and adds instead of 16 horizontal sums of ~8 dependent operations each).
inline __m512 transposeSum16(const __m512 *v) {
  __m512 x[8], y[4];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3] of v[2i], v[2i+1]
    x[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: the lane sums of v[4i .. 4i+3]
    const __m512d a = _mm512_castps_pd(x[2 * i]), b = _mm512_castps_pd(x[2 * i + 1]);
    y[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 z0 = _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], 0x88), _mm512_shuffle_f32x4(y[0], y[1], 0xDD));
  const __m512 z1 = _mm512_add_ps(_mm512_shuffle_f32x4(y[2], y[3], 0x88), _mm512_shuffle_f32x4(y[2], y[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(z0, z1, 0x88), _mm512_shuffle_f32x4(z0, z1, 0xDD));
}

// 16 K/V elements as f32: f32 loaded, bf16 widened exactly (zero-extended into the high half).
inline __m512 load16(const float *p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t *p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Scores of every head (heads <= 64) over keys [0, n), 16 keys x one head at a time: each key row
// is read in order (all heads of a key are adjacent), masked and past-the-end lanes get -inf;
// keys past n read key 0 instead. scores[h * nPad + p]; maxes[h] the per-lane maxima. False if
// every key is masked.
template <typename KV>
bool headScores64(const float *q, const KV *k, int64_t kStride, const uint8_t *keep, int64_t n, int64_t heads,
                  float scale, float *scores, __m512 *maxes) {
  constexpr int64_t dk = 64;
  const int64_t nPad = (n + 15) / 16 * 16;
  const float kMinusInf = -__builtin_inff();
  for (int64_t h = 0; h < heads; ++h) maxes[h] = _mm512_set1_ps(kMinusInf);
  bool any = false;
  for (int64_t p0 = 0; p0 < n; p0 += 16) {
    const int count = n - p0 >= 16 ? 16 : int(n - p0);
    __mmask16 live = count == 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1u);
    if (keep)
      for (int j = 0; j < count; ++j)
        if (!keep[p0 + j]) live &= __mmask16(~(1u << j));
    if (!live) {
      for (int64_t h = 0; h < heads; ++h) _mm512_storeu_ps(scores + h * nPad + p0, _mm512_set1_ps(kMinusInf));
      continue;
    }
    any = true;
    const KV *rows[16];
    for (int j = 0; j < 16; ++j) rows[j] = k + (p0 + (j < count ? j : 0)) * kStride;
    for (int64_t h = 0; h < heads; ++h) {
      const float *qh = q + h * dk;
      const __m512 q0 = _mm512_loadu_ps(qh), q1 = _mm512_loadu_ps(qh + 16), q2 = _mm512_loadu_ps(qh + 32),
                   q3 = _mm512_loadu_ps(qh + 48);
      __m512 acc[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        const KV *kr = rows[j] + h * dk;
        __m512 a = _mm512_mul_ps(q0, load16(kr));
        a = _mm512_fmadd_ps(q1, load16(kr + 16), a);
        a = _mm512_fmadd_ps(q2, load16(kr + 32), a);
        acc[j] = _mm512_fmadd_ps(q3, load16(kr + 48), a);
      }
      const __m512 s = _mm512_mask_mul_ps(_mm512_set1_ps(kMinusInf), live, transposeSum16(acc), _mm512_set1_ps(scale));
      _mm512_storeu_ps(scores + h * nPad + p0, s);
      maxes[h] = _mm512_max_ps(maxes[h], s);
    }
  }
  return any;
}

// Each head's softmax numerators exp(s - max) in place (masked keys: exactly 0), 16 keys at a
// time; inv[h] = 1 / (their sum x divisor).
inline void numerators(float *scores, const __m512 *maxes, int64_t nPad, int64_t heads, float divisor, float *inv) {
  const __m512 l2e = _mm512_set1_ps(kLog2e);
  for (int64_t h = 0; h < heads; ++h) {
    const __m512 shift = _mm512_set1_ps(_mm512_reduce_max_ps(maxes[h]) * kLog2e);
    __m512 sums = _mm512_setzero_ps();
    float *sh = scores + h * nPad;
    for (int64_t p = 0; p < nPad; p += 16) {
      const __m512 e = exp2v(_mm512_fmsub_ps(_mm512_loadu_ps(sh + p), l2e, shift));
      _mm512_storeu_ps(sh + p, e);
      sums = _mm512_add_ps(sums, e);
    }
    inv[h] = 1.0f / (_mm512_reduce_add_ps(sums) * divisor);
  }
}

template <typename KV>
void allHeads64(const float *q, const KV *k, int64_t kStride, const KV *v, int64_t vStride, const uint8_t *keep,
                int64_t n, int64_t heads, float scale, float *scores, float *out) {
  constexpr int64_t dk = 64;
  const int64_t nPad = (n + 15) / 16 * 16;
  __m512 maxes[64];  // per head (heads <= 64: checked by the caller)
  const bool any = headScores64(q, k, kStride, keep, n, heads, scale, scores, maxes);
  for (int64_t j = 0; j < heads * dk; j += 16) _mm512_storeu_ps(out + j, _mm512_setzero_ps());
  if (!any) return;  // a fully masked row gives zeros
  // Softmax numerators per head (masked keys: exactly 0) and the reciprocal of their sum.
  float inv[64];
  numerators(scores, maxes, nPad, heads, 1.0f, inv);
  // out = sum_p w_p V[p]: four heads (256 columns, 16 accumulators) per pass over the kept keys,
  // each V row read in order. Masked keys are skipped, not weighted by 0 (a stale V may be NaN).
  for (int64_t h0 = 0; h0 < heads; h0 += 4) {
    const int hc = heads - h0 >= 4 ? 4 : int(heads - h0);
    __m512 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t p = 0; p < n; ++p) {
      if (keep && !keep[p]) continue;
      const KV *vp = v + p * vStride + h0 * dk;
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        if (g >= hc) break;
        const __m512 w = _mm512_set1_ps(scores[(h0 + g) * nPad + p]);
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) acc[4 * g + c] = _mm512_fmadd_ps(w, load16(vp + 64 * g + 16 * c), acc[4 * g + c]);
      }
    }
    for (int g = 0; g < hc; ++g) {
      const __m512 scaleBy = _mm512_set1_ps(inv[h0 + g]);
      for (int c = 0; c < 4; ++c) _mm512_storeu_ps(out + (h0 + g) * dk + 16 * c, _mm512_mul_ps(acc[4 * g + c], scaleBy));
    }
  }
}

// tfm.attention_weights of one row: each head's softmax numerators (as allHeads64's) over their
// sum, averaged over the heads into out[0, n); masked keys weigh exactly 0.
template <typename KV>
void weights64(const float *q, const KV *k, int64_t kStride, const uint8_t *keep, int64_t n, int64_t heads, float scale,
               float *scores, float *out) {
  const int64_t nPad = (n + 15) / 16 * 16;
  __m512 maxes[64];
  const bool any = headScores64(q, k, kStride, keep, n, heads, scale, scores, maxes);
  for (int64_t p = 0; p < n; ++p) out[p] = 0;
  if (!any) return;
  // Per head: numerators in place and 1 / (their sum x heads); then out, 16 keys at a time.
  float inv[64];
  numerators(scores, maxes, nPad, heads, float(heads), inv);
  for (int64_t p = 0; p < nPad; p += 16) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t h = 0; h < heads; ++h) acc = _mm512_fmadd_ps(_mm512_loadu_ps(scores + h * nPad + p), _mm512_set1_ps(inv[h]), acc);
    const __mmask16 m = n - p >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - p)) - 1u);
    _mm512_mask_storeu_ps(out + p, m, acc);
  }
}

}  // namespace

void attentionWeightsAllHeads64Avx512(const float *q, const float *k, int64_t kStride, const uint8_t *keep, int64_t n,
                                      int64_t heads, float scale, float *scores, float *out) {
  weights64(q, k, kStride, keep, n, heads, scale, scores, out);
}

void attentionWeightsAllHeads64Avx512Bf16(const float *q, const uint16_t *k, int64_t kStride, const uint8_t *keep,
                                          int64_t n, int64_t heads, float scale, float *scores, float *out) {
  weights64(q, k, kStride, keep, n, heads, scale, scores, out);
}

void attendAllHeads64Avx512(const float *q, const float *k, int64_t kStride, const float *v, int64_t vStride,
                            const uint8_t *keep, int64_t n, int64_t heads, float scale, float *scores, float *out) {
  allHeads64(q, k, kStride, v, vStride, keep, n, heads, scale, scores, out);
}

void attendAllHeads64Avx512Bf16(const float *q, const uint16_t *k, int64_t kStride, const uint16_t *v, int64_t vStride,
                                const uint8_t *keep, int64_t n, int64_t heads, float scale, float *scores, float *out) {
  allHeads64(q, k, kStride, v, vStride, keep, n, heads, scale, scores, out);
}

namespace {

template <typename KV>
void pairBody(const float *q, const KV *k, int64_t kStride, const KV *v, int64_t vStride,
                  const uint8_t *keep, int64_t n, int64_t dk, float scale, float *scores, float *out) {
  const float kMinusInf = -__builtin_inff();
  float mx = kMinusInf;
  bool any = false;
  for (int64_t p = 0; p < n; ++p) {
    if (keep && !keep[p]) {
      scores[p] = kMinusInf;
      continue;
    }
    const KV *kp = k + p * kStride;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 32 <= dk; j += 32) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j), load16(kp + j), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j + 16), load16(kp + j + 16), a1);
    }
    if (j < dk) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j), load16(kp + j), a0);
    const float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) * scale;
    scores[p] = s;
    mx = s > mx ? s : mx;
    any = true;
  }
  for (int64_t j = 0; j < dk; j += 16) _mm512_storeu_ps(out + j, _mm512_setzero_ps());
  if (!any) return;
  // Numerators exp(s - max) = 2^((s - max) log2 e), 16 keys at a time; masked keys give 0.
  const __m512 shift = _mm512_set1_ps(mx * kLog2e), l2e = _mm512_set1_ps(kLog2e);
  __m512 sums = _mm512_setzero_ps();
  for (int64_t p = 0; p < n; p += 16) {
    const __mmask16 m = n - p >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - p)) - 1u);
    const __m512 s = _mm512_mask_loadu_ps(_mm512_set1_ps(kMinusInf), m, scores + p);
    const __m512 e = exp2v(_mm512_fmsub_ps(s, l2e, shift));
    _mm512_mask_storeu_ps(scores + p, m, e);
    sums = _mm512_add_ps(sums, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sums));
  // out = sum_p w_p V[p] / sum: 64 columns per pass (4 accumulators), V rows in order.
  for (int64_t c0 = 0; c0 < dk; c0 += 64) {
    const int chunks = dk - c0 >= 64 ? 4 : int((dk - c0) / 16);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps(),
           acc3 = _mm512_setzero_ps();
    for (int64_t p = 0; p < n; ++p) {
      if (keep && !keep[p]) continue;
      const __m512 w = _mm512_set1_ps(scores[p]);
      const KV *vp = v + p * vStride + c0;
      acc0 = _mm512_fmadd_ps(w, load16(vp), acc0);
      if (chunks > 1) acc1 = _mm512_fmadd_ps(w, load16(vp + 16), acc1);
      if (chunks > 2) acc2 = _mm512_fmadd_ps(w, load16(vp + 32), acc2);
      if (chunks > 3) acc3 = _mm512_fmadd_ps(w, load16(vp + 48), acc3);
    }
    _mm512_storeu_ps(out + c0, _mm512_mul_ps(acc0, inv));
    if (chunks > 1) _mm512_storeu_ps(out + c0 + 16, _mm512_mul_ps(acc1, inv));
    if (chunks > 2) _mm512_storeu_ps(out + c0 + 32, _mm512_mul_ps(acc2, inv));
    if (chunks > 3) _mm512_storeu_ps(out + c0 + 48, _mm512_mul_ps(acc3, inv));
  }
}

}  // namespace

void attendAvx512(const float *q, const float *k, int64_t kStride, const float *v, int64_t vStride, const uint8_t *keep,
                  int64_t n, int64_t dk, float scale, float *scores, float *out) {
  pairBody(q, k, kStride, v, vStride, keep, n, dk, scale, scores, out);
}

void attendAvx512Bf16(const float *q, const uint16_t *k, int64_t kStride, const uint16_t *v, int64_t vStride,
                      const uint8_t *keep, int64_t n, int64_t dk, float scale, float *scores, float *out) {
  pairBody(q, k, kStride, v, vStride, keep, n, dk, scale, scores, out);
}

}  // namespace tfmrt::decode
