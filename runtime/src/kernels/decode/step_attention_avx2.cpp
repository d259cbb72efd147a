// AVX2 + FMA body of the one-query-row attention (see step_attention.h), for CPUs without
// AVX-512: attendAvx512's three passes on 8 lanes, per (row, head). The portable loop
// (attendReference: a scalar std::exp per key) took 1.1 ms of a 5.5 ms greedy decoder step on a
// Zen 3.
//
// Compiled with -mavx2 -mfma and entered only after attention::cpuHasAvx2Fma(); no C++ library
// header, no inline function of a shared header (see packed_gemm_avx512.cpp).
#include <immintrin.h>

#include "kernels/avx2_exp.h"
#include "kernels/decode/step_attention.h"

namespace tfmrt::decode {

void attendAvx2(const float *q, const float *k, int64_t kStride, const float *v, int64_t vStride, const uint8_t *keep,
                int64_t n, int64_t dk, float scale, float *scores, float *out) {
  constexpr float kLog2e = 1.44269504088896340736f;
  const float kMinusInf = -__builtin_inff();
  float mx = kMinusInf;
  bool any = false;
  for (int64_t p = 0; p < n; ++p) {
    if (keep && !keep[p]) {
      scores[p] = kMinusInf;
      continue;
    }
    const float *kp = k + p * kStride;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= dk; j += 16) {
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), _mm256_loadu_ps(kp + j), a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j + 8), _mm256_loadu_ps(kp + j + 8), a1);
    }
    if (j < dk) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), _mm256_loadu_ps(kp + j), a0);
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
      const float *vp = v + r * vStride + c0;
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c)
        if (c < chunks) acc[c] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vp + 8 * c), acc[c]);
    }
    for (int c = 0; c < chunks; ++c) _mm256_storeu_ps(out + c0 + 8 * c, _mm256_mul_ps(acc[c], inv));
  }
}

}  // namespace tfmrt::decode
