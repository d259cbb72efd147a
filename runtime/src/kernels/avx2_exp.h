// 2^x, tail masks and reductions on 8 lanes for the AVX2 TUs (log_softmax_avx2.cpp,
// step_attention_avx2.cpp, packed_gemm_avx2.cpp). Include only
// from TUs compiled with -mavx2 -mfma: the functions are `static` (internal linkage), so each TU
// keeps its own copy and the linker never merges it into code that runs on other CPUs.
#pragma once

#include <immintrin.h>

namespace tfmrt::avx2 {

// 2^x for x <= 0, as avx512::exp2v: x < -125 (incl. -inf from masking, and NaN) gives exactly 0;
// Cephes exp2f, x = n + f, |f| <= 1/2, 2^f = 1 + f P(f), relative error ~2e-7. 2^n is built in
// the exponent bits (n + 127 in [2, 127] for live lanes).
static inline __m256 exp2v(__m256 x) {
  const __m256 live = _mm256_cmp_ps(x, _mm256_set1_ps(-125.0f), _CMP_GE_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-127.0f));  // keeps dead lanes finite
  const __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(x, n);
  __m256 p = _mm256_set1_ps(1.535336188319500e-4f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.339887440266574e-3f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.618437357674640e-3f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550332471162809e-2f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.402264791363012e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931472028550421e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(bits)), live);
}

// Lanes 0..count-1 set (count in [0, 8]): the mask of maskload/maskstore for a row's tail.
static inline __m256i tailMask(long count) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(count)), lane);
}

static inline float reduceMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

static inline float reduceAdd(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace tfmrt::avx2
