// AVX-512 body of the one-query-row attention (see step_attention.h).
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

}  // namespace

void attendAvx512(const float *q, const float *k, int64_t kStride, const float *v, int64_t vStride,
                  const uint8_t *keep, int64_t n, int64_t dk, float scale, float *scores, float *out) {
  const float kMinusInf = -__builtin_inff();
  float mx = kMinusInf;
  bool any = false;
  for (int64_t p = 0; p < n; ++p) {
    if (keep && !keep[p]) {
      scores[p] = kMinusInf;
      continue;
    }
    const float *kp = k + p * kStride;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 32 <= dk; j += 32) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j), _mm512_loadu_ps(kp + j), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j + 16), _mm512_loadu_ps(kp + j + 16), a1);
    }
    if (j < dk) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j), _mm512_loadu_ps(kp + j), a0);
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
      const float *vp = v + p * vStride + c0;
      acc0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(vp), acc0);
      if (chunks > 1) acc1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(vp + 16), acc1);
      if (chunks > 2) acc2 = _mm512_fmadd_ps(w, _mm512_loadu_ps(vp + 32), acc2);
      if (chunks > 3) acc3 = _mm512_fmadd_ps(w, _mm512_loadu_ps(vp + 48), acc3);
    }
    _mm512_storeu_ps(out + c0, _mm512_mul_ps(acc0, inv));
    if (chunks > 1) _mm512_storeu_ps(out + c0 + 16, _mm512_mul_ps(acc1, inv));
    if (chunks > 2) _mm512_storeu_ps(out + c0 + 32, _mm512_mul_ps(acc2, inv));
    if (chunks > 3) _mm512_storeu_ps(out + c0 + 48, _mm512_mul_ps(acc3, inv));
  }
}

}  // namespace tfmrt::decode
