// AVX2 + FMA body of the fast tfm.log_softmax (xent.cpp), for CPUs without AVX-512: the same
// three passes as log_softmax_avx512.cpp on 8 lanes. The portable loop it replaces was compiled
// (target_clones "avx2") into scalar code -- GCC vectorised neither the max nor the exp sum --
// and took 0.96 ms of a 5.5 ms greedy decoder step on a Zen 3 (8000 logits x ~30 rows).
//
// Compiled with -mavx2 -mfma and entered only after fast::cpuHasAvx2Fma(); no C++ library
// header, no inline function of a shared header (see packed_gemm_avx512.cpp).
#include <immintrin.h>

#include <cstdint>

#include "kernels/avx2_exp.h"
#include "kernels/cpu/log_softmax.h"

namespace tfmrt::fast {

void logSoftmaxRowAvx2(const float *x, int64_t n, float *y) {
  const float kMinusInf = -__builtin_inff();
  const float kLog2e = 1.44269504088896340736f, kLn2 = 0.693147180559945309f;
  const __m256 minusInf = _mm256_set1_ps(kMinusInf);
  __m256 m0 = minusInf, m1 = minusInf;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + j));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + j + 8));
  }
  for (; j < n; j += 8) {
    const __m256i k = avx2::tailMask(n - j);
    m0 = _mm256_max_ps(m0, _mm256_blendv_ps(minusInf, _mm256_maskload_ps(x + j, k), _mm256_castsi256_ps(k)));
  }
  const float mx = avx2::reduceMax(_mm256_max_ps(m0, m1));
  const __m256 shift = _mm256_set1_ps(mx * kLog2e), l2e = _mm256_set1_ps(kLog2e);
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  for (j = 0; j + 16 <= n; j += 16) {
    s0 = _mm256_add_ps(s0, avx2::exp2v(_mm256_fmsub_ps(_mm256_loadu_ps(x + j), l2e, shift)));
    s1 = _mm256_add_ps(s1, avx2::exp2v(_mm256_fmsub_ps(_mm256_loadu_ps(x + j + 8), l2e, shift)));
  }
  for (; j < n; j += 8) {
    const __m256i k = avx2::tailMask(n - j);
    const __m256 z = _mm256_blendv_ps(minusInf, _mm256_maskload_ps(x + j, k), _mm256_castsi256_ps(k));
    s0 = _mm256_add_ps(s0, avx2::exp2v(_mm256_fmsub_ps(z, l2e, shift)));
  }
  const float sum = avx2::reduceAdd(_mm256_add_ps(s0, s1));
  const __m256 lse = _mm256_set1_ps(mx + kLn2 * __builtin_log2f(sum));
  for (j = 0; j + 8 <= n; j += 8) _mm256_storeu_ps(y + j, _mm256_sub_ps(_mm256_loadu_ps(x + j), lse));
  if (j < n) {
    const __m256i k = avx2::tailMask(n - j);
    _mm256_maskstore_ps(y + j, k, _mm256_sub_ps(_mm256_maskload_ps(x + j, k), lse));
  }
}

}  // namespace tfmrt::fast
