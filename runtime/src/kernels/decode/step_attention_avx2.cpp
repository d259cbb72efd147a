// AVX2 + FMA bodies of the one-query-row attention (see step_attention.h), for CPUs without
// AVX-512: attendAvx512's three passes on 8 lanes, per (row, head), and the all-heads body for
// head_dim 64 (also for bf16 keys and values, widened to f32 as they are loaded). The portable loop (attendReference: a scalar std::exp per key) took 1.1 ms of a
// 5.5 ms greedy decoder step on a Zen 3; per (row, head) pairs, the cross-attention's key loads
// still took half of the kernel's time there (each pair reads 256 bytes of every 1 KB key row, and
// the memory is not in cache after a step's weights went through).
//
// Compiled with -mavx2 -mfma and entered only after attention::cpuHasAvx2Fma(); no C++ library
// header, no inline function of a shared header (see packed_gemm_avx512.cpp).
#include <immintrin.h>

#include "kernels/avx2_exp.h"
#include "kernels/decode/step_attention.h"

namespace tfmrt::decode {
namespace {

constexpr float kLog2e = 1.44269504088896340736f;

// Lane j of the result = the sum of the 8 lanes of v[j]: 8 dot products finished together.
inline __m256 transposeSum8(const __m256 *v) {
  // hadd(hadd(v0, v1), hadd(v2, v3)) = [sums of v0..v3 over lanes 0-3 | the same over lanes 4-7]
  const __m256 a = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 b = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

// 8 K/V elements as f32: f32 loaded, bf16 widened exactly (zero-extended into the high half).
inline __m256 load8(const float *p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t *p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

template <typename KV>
void allHeads64(const float *q, const KV *k, int64_t kStride, const KV *v, int64_t vStride, const uint8_t *keep,
                int64_t n, int64_t heads, float scale, float *scores, float *out) {
  constexpr int64_t dk = 64;
  const int64_t nPad = (n + 7) / 8 * 8;
  const float kMinusInf = -__builtin_inff();
  const __m256 minusInf = _mm256_set1_ps(kMinusInf);
  // Scores, 8 keys x one head at a time: each key row is read in order (all heads of a key are
  // adjacent); masked and past-the-end lanes get -inf, and keys past n read key 0 instead.
  __m256 maxes[64];  // per head (heads <= 64: checked by the caller)
  for (int64_t h = 0; h < heads; ++h) maxes[h] = minusInf;
  bool any = false;
  for (int64_t p0 = 0; p0 < n; p0 += 8) {
    const int count = n - p0 >= 8 ? 8 : int(n - p0);
    alignas(32) int32_t liveBits[8];
    bool anyLive = false;
    for (int j = 0; j < 8; ++j) {
      liveBits[j] = j < count && (!keep || keep[p0 + j]) ? -1 : 0;
      anyLive |= liveBits[j] != 0;
    }
    if (!anyLive) {
      for (int64_t h = 0; h < heads; ++h) _mm256_storeu_ps(scores + h * nPad + p0, minusInf);
      continue;
    }
    any = true;
    const __m256 live = _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i *>(liveBits)));
    const KV *rows[8];
    for (int j = 0; j < 8; ++j) rows[j] = k + (p0 + (j < count ? j : 0)) * kStride;
    for (int64_t h = 0; h < heads; ++h) {
      const float *qh = q + h * dk;
      __m256 acc[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const KV *kr = rows[j] + h * dk;
        __m256 a = _mm256_mul_ps(_mm256_loadu_ps(qh), load8(kr));
#pragma GCC unroll 7
        for (int c = 1; c < 8; ++c) a = _mm256_fmadd_ps(_mm256_loadu_ps(qh + 8 * c), load8(kr + 8 * c), a);
        acc[j] = a;
      }
      const __m256 s = _mm256_blendv_ps(minusInf, _mm256_mul_ps(transposeSum8(acc), _mm256_set1_ps(scale)), live);
      _mm256_storeu_ps(scores + h * nPad + p0, s);
      maxes[h] = _mm256_max_ps(maxes[h], s);
    }
  }
  for (int64_t j = 0; j < heads * dk; j += 8) _mm256_storeu_ps(out + j, _mm256_setzero_ps());
  if (!any) return;  // a fully masked row gives zeros
  // Per head: softmax numerators (masked keys: exactly 0), then out = sum_p w_p V[p] / sum with 8
  // accumulators (one head's 64 columns), V rows in order. Masked keys are skipped, not weighted
  // by 0 (a stale V may be NaN).
  const __m256 l2e = _mm256_set1_ps(kLog2e);
  for (int64_t h = 0; h < heads; ++h) {
    const __m256 shift = _mm256_set1_ps(avx2::reduceMax(maxes[h]) * kLog2e);
    __m256 sums = _mm256_setzero_ps();
    float *sh = scores + h * nPad;
    for (int64_t p = 0; p < nPad; p += 8) {
      const __m256 e = avx2::exp2v(_mm256_fmsub_ps(_mm256_loadu_ps(sh + p), l2e, shift));
      _mm256_storeu_ps(sh + p, e);
      sums = _mm256_add_ps(sums, e);
    }
    const __m256 inv = _mm256_set1_ps(1.0f / avx2::reduceAdd(sums));
    __m256 acc[8];
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t p = 0; p < n; ++p) {
      if (keep && !keep[p]) continue;
      const __m256 w = _mm256_broadcast_ss(sh + p);
      const KV *vp = v + p * vStride + h * dk;
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) acc[c] = _mm256_fmadd_ps(w, load8(vp + 8 * c), acc[c]);
    }
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) _mm256_storeu_ps(out + h * dk + 8 * c, _mm256_mul_ps(acc[c], inv));
  }
}

}  // namespace

void attendAllHeads64Avx2(const float *q, const float *k, int64_t kStride, const float *v, int64_t vStride,
                          const uint8_t *keep, int64_t n, int64_t heads, float scale, float *scores, float *out) {
  allHeads64(q, k, kStride, v, vStride, keep, n, heads, scale, scores, out);
}

void attendAllHeads64Avx2Bf16(const float *q, const uint16_t *k, int64_t kStride, const uint16_t *v, int64_t vStride,
                              const uint8_t *keep, int64_t n, int64_t heads, float scale, float *scores, float *out) {
  allHeads64(q, k, kStride, v, vStride, keep, n, heads, scale, scores, out);
}

namespace {

template <typename KV>
void pairBody(const float *q, const KV *k, int64_t kStride, const KV *v, int64_t vStride, const uint8_t *keep,
                int64_t n, int64_t dk, float scale, float *scores, float *out) {
  const float kMinusInf = -__builtin_inff();
  float mx = kMinusInf;
  bool any = false;
  for (int64_t p = 0; p < n; ++p) {
    if (keep && !keep[p]) {
      scores[p] = kMinusInf;
      continue;
    }
    const KV *kp = k + p * kStride;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= dk; j += 16) {
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), load8(kp + j), a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j + 8), load8(kp + j + 8), a1);
    }
    if (j < dk) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), load8(kp + j), a0);
    const float s = avx2::reduceAdd(_mm256_add_ps(a0, a1)) * scale;
    scores[p] = s;
    mx = s > mx ? s : mx;
    any = true;
  }
  for (int64_t j = 0; j < dk; j += 8) _mm256_storeu_ps(out + j, _mm256_setzero_ps());
  if (!any) return;  // a fully masked row gives zeros
  // Numerators 2^((s - max) log2 e), 8 keys at a time; masked keys (-inf) give exactly 0.
  const __m256 shift = _mm256_set1_ps(mx * kLog2e), l2e = _mm256_set1_ps(kLog2e), minusInf = _mm256_set1_ps(kMinusInf);
  __m256 sums = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= n; p += 8) {
    const __m256 e = avx2::exp2v(_mm256_fmsub_ps(_mm256_loadu_ps(scores + p), l2e, shift));
    _mm256_storeu_ps(scores + p, e);
    sums = _mm256_add_ps(sums, e);
  }
  if (p < n) {
    const __m256i m = avx2::tailMask(n - p);
    const __m256 s = _mm256_blendv_ps(minusInf, _mm256_maskload_ps(scores + p, m), _mm256_castsi256_ps(m));
    const __m256 e = avx2::exp2v(_mm256_fmsub_ps(s, l2e, shift));
    _mm256_maskstore_ps(scores + p, m, e);
    sums = _mm256_add_ps(sums, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / avx2::reduceAdd(sums));
  // out = sum_p w_p V[p] / sum: 64 columns per pass (8 accumulators), V rows in order. Masked keys
  // are skipped, not weighted by 0 (a stale V may be NaN).
  for (int64_t c0 = 0; c0 < dk; c0 += 64) {
    const int chunks = dk - c0 >= 64 ? 8 : int((dk - c0) / 8);
    __m256 acc[8];
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t r = 0; r < n; ++r) {
      if (keep && !keep[r]) continue;
      const __m256 w = _mm256_broadcast_ss(scores + r);
      const KV *vp = v + r * vStride + c0;
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c)
        if (c < chunks) acc[c] = _mm256_fmadd_ps(w, load8(vp + 8 * c), acc[c]);
    }
    for (int c = 0; c < chunks; ++c) _mm256_storeu_ps(out + c0 + 8 * c, _mm256_mul_ps(acc[c], inv));
  }
}

}  // namespace

void attendAvx2(const float *q, const float *k, int64_t kStride, const float *v, int64_t vStride, const uint8_t *keep,
                int64_t n, int64_t dk, float scale, float *scores, float *out) {
  pairBody(q, k, kStride, v, vStride, keep, n, dk, scale, scores, out);
}

void attendAvx2Bf16(const float *q, const uint16_t *k, int64_t kStride, const uint16_t *v, int64_t vStride,
                    const uint8_t *keep, int64_t n, int64_t dk, float scale, float *scores, float *out) {
  pairBody(q, k, kStride, v, vStride, keep, n, dk, scale, scores, out);
}

}  // namespace tfmrt::decode
