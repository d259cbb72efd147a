// AVX-512 body of the fast tfm.log_softmax (xent.cpp): decode_step's vocabulary-wide
// log-probabilities, one row per hypothesis. Three passes over a row that stays in L1 (8000
// logits: 32 KB): the maximum, the sum of 2^((z - max) log2 e) with the exp2 polynomial the
// attention kernels use, and z - logsumexp. The portable loops (expApprox, and a sum of the logits
// the cross-entropy needs but log_softmax does not) took 3.4-7 % of a decoder step.
//
// Compiled with -mavx512f -mavx512vl -mavx512dq -mfma and entered only after
// attention::cpuHasAvx512(); no C++ library header, no inline function of a shared header
// (see packed_gemm_avx512.cpp).
// GCC 12 warns about _mm512_undefined_ps() inside its own reduce and masked intrinsics (a known
// false positive in avx512fintrin.h).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/avx512_exp.h"
#include "kernels/cpu/log_softmax.h"

namespace tfmrt::fast {

void logSoftmaxRowAvx512(const float *x, int64_t n, float *y) {
  const float kMinusInf = -__builtin_inff();
  const float kLog2e = 1.44269504088896340736f, kLn2 = 0.693147180559945309f;
  __m512 m0 = _mm512_set1_ps(kMinusInf), m1 = m0;
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + j));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + j + 16));
  }
  for (; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1u);
    m0 = _mm512_max_ps(m0, _mm512_mask_loadu_ps(_mm512_set1_ps(kMinusInf), k, x + j));
  }
  const float mx = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
  const __m512 shift = _mm512_set1_ps(mx * kLog2e), l2e = _mm512_set1_ps(kLog2e);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  for (j = 0; j + 32 <= n; j += 32) {
    s0 = _mm512_add_ps(s0, avx512::exp2v(_mm512_fmsub_ps(_mm512_loadu_ps(x + j), l2e, shift)));
    s1 = _mm512_add_ps(s1, avx512::exp2v(_mm512_fmsub_ps(_mm512_loadu_ps(x + j + 16), l2e, shift)));
  }
  for (; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1u);
    const __m512 e = avx512::exp2v(_mm512_fmsub_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(kMinusInf), k, x + j), l2e, shift));
    s0 = _mm512_add_ps(s0, e);
  }
  // log(sum) from the float sum: log2 by the exponent and a polynomial would save a libm call
  // per row, which is nothing next to 8000 exponentials.
  const float sum = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
  const __m512 lse = _mm512_set1_ps(mx + kLn2 * __builtin_log2f(sum));
  for (j = 0; j + 16 <= n; j += 16) _mm512_storeu_ps(y + j, _mm512_sub_ps(_mm512_loadu_ps(x + j), lse));
  if (j < n) {
    const __mmask16 k = __mmask16((1u << (n - j)) - 1u);
    _mm512_mask_storeu_ps(y + j, k, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), lse));
  }
}

}  // namespace tfmrt::fast
