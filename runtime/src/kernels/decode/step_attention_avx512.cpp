// AVX-512 body of the one-query-row attention (see step_attention.h).
#include <immintrin.h>

#include <cmath>

#include "kernels/decode/step_attention.h"

namespace tfmrt::decode {

void attendAvx512(const float *q, const float *k, int64_t kStride, const float *v, int64_t vStride,
                  const uint8_t *keep, int64_t n, int64_t dk, float scale, float *scores, float *out) {
  float mx = -1e30f;
  bool any = false;
  for (int64_t p = 0; p < n; ++p) {
    if (keep && !keep[p]) continue;
    const float *kp = k + p * kStride;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < dk; j += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + j), _mm512_loadu_ps(kp + j), acc);
    scores[p] = _mm512_reduce_add_ps(acc) * scale;
    mx = scores[p] > mx ? scores[p] : mx;
    any = true;
  }
  for (int64_t j = 0; j < dk; j += 16) _mm512_storeu_ps(out + j, _mm512_setzero_ps());
  if (!any) return;
  float sum = 0;
  for (int64_t p = 0; p < n; ++p) {
    if (keep && !keep[p]) continue;
    scores[p] = std::exp(scores[p] - mx);
    sum += scores[p];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < dk; j += 16) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t p = 0; p < n; ++p) {
      if (keep && !keep[p]) continue;
      acc = _mm512_fmadd_ps(_mm512_set1_ps(scores[p]), _mm512_loadu_ps(v + p * vStride + j), acc);
    }
    _mm512_storeu_ps(out + j, _mm512_mul_ps(acc, _mm512_set1_ps(inv)));
  }
}

}  // namespace tfmrt::decode
