// 2^x on 16 lanes for the AVX-512 TUs (attention_avx512.cpp, step_attention_avx512.cpp). Include
// only from TUs compiled with -mavx512f: the function is `static` (internal linkage), so each TU
// keeps its own copy and the linker never merges it into code that runs on other CPUs.
#pragma once

#include <immintrin.h>

namespace tfmrt::avx512 {

// 2^x for x <= 0 (score - running max); x < -125 (incl. -inf from masking, and NaN) gives exactly
// 0, so no result is denormal (denormal operands cost FMA micro-code assists). Cephes exp2f:
// x = n + f, |f| <= 1/2, 2^f = 1 + f P(f), relative error ~2e-7.
static inline __m512 exp2v(__m512 x) {
  const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-125.0f), _CMP_GE_OQ);
  x = _mm512_max_ps(x, _mm512_set1_ps(-127.0f));  // keeps dead lanes finite (no inf - inf)
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(1.535336188319500e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339887440266574e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(live, p, n);
}

}  // namespace tfmrt::avx512
