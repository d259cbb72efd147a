// Building blocks of the hand-written kernels of the Dnnl backend ("fast.*").
//
// The library is compiled for baseline x86-64 (SSE2) so it runs anywhere; the hot loops are
// cloned for AVX2 and AVX-512 with GCC's target_clones and the dynamic loader picks the best clone
// for the CPU once (an ifunc). A clone must not contain an OpenMP parallel region (the outlined
// body would not inherit the target), so parallel drivers call cloned per-span workers.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstring>

#include "kernels/kernel_util.h"
#include "tfmrt/fast_math.h"

// (Not under ThreadSanitizer: the clones' ifunc resolvers run at relocation, before its runtime is
// up, and crash the process.)
#if defined(__GNUC__) && defined(__x86_64__) && defined(__ELF__) && !defined(__SANITIZE_THREAD__)
#define TFMRT_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TFMRT_SIMD_CLONES
#endif

namespace tfmrt::fast {

// Runs body(begin, end) over [0, n) split into one contiguous span per thread (spans a multiple
// of 16 elements, so vector loops see aligned-size bodies), in parallel only when n >= minParallel.
template <typename Body>
void parallelSpans(int64_t n, int64_t minParallel, const Body &body) {
  if (n <= 0) return;
  if (n < minParallel || omp_get_max_threads() == 1) {
    body(int64_t(0), n);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t per = ((n + threads - 1) / threads + 15) / 16 * 16;
    const int64_t begin = std::min(n, t * per), end = std::min(n, begin + per);
    if (begin < end) body(begin, end);
  }
}

// body(p0, p1) over `panels` column panels of a GEMM, one contiguous range per thread, in parallel
// only when the product has at least 8 kParallelMinElements multiply-adds (`macs` = m n k): the
// panel GEMMs (f32, bf16, int8) split their work this way.
template <typename Body>
void parallelPanels(int64_t panels, int64_t macs, const Body &body) {
  const int threads = int(std::min<int64_t>(omp_get_max_threads(), panels));
  if (threads > 1 && macs >= kParallelMinElements * 8) {
#pragma omp parallel num_threads(threads)
    {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      body(panels * t / nt, panels * (t + 1) / nt);
    }
  } else {
    body(int64_t(0), panels);
  }
}

// max(z[0..n)) in 16 lanes of a GCC vector type (inline, so each target clone gets its own
// code: one zmm, two ymm or four xmm registers). GCC leaves `omp simd reduction(max)` over
// std::max scalar, and left an array of 16 lanes scalar too (16 vmaxss per 16 logits in the
// AVX-512 clone of the cross-entropy's rows). A NaN may or may not win (as with std::max); the
// sums that follow turn it into NaN.
inline float rowMax(const float *z, int64_t n) {
  constexpr int kLanes = 16;
  typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));
  const float inf = std::numeric_limits<float>::infinity();
  Lanes lanes = {-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf};
  const int64_t whole = n / kLanes * kLanes;
  for (int64_t v = 0; v < whole; v += kLanes) {
    Lanes x;
    std::memcpy(&x, z + v, sizeof x);  // unaligned load
    lanes = lanes > x ? lanes : x;
  }
  float mx = -inf;
  for (int j = 0; j < kLanes; ++j) mx = lanes[j] > mx ? lanes[j] : mx;
  for (int64_t v = whole; v < n; ++v) mx = z[v] > mx ? z[v] : mx;
  return mx;
}

using tfmrt::fastmath::expApprox;  // tfmrt/fast_math.h

// Exact-erf GELU, 0.5 x (1 + erf(x / sqrt 2)), with erfc from Abramowitz & Stegun 7.1.26
// (|error| <= 1.5e-7). For x < 0 the term 1 + erf is taken as erfc(|z|) directly, so there is no
// cancellation; absolute error of the GELU < 1e-6 for |x| < 10.
inline float geluErf(float x) {
  const float z = std::fabs(x) * 0.70710678118654752f;
  const float t = 1.0f / (1.0f + 0.3275911f * z);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float erfcAbs = p * t * expApprox(-z * z);  // erfc(|z|)
  const float onePlusErf = x < 0.0f ? erfcAbs : 2.0f - erfcAbs;
  return 0.5f * x * onePlusErf;
}

// Cloned span workers (fast_elementwise.cpp). `y` may alias `a`.
void addSpan(const float *a, const float *b, float *y, int64_t n);
void geluSpan(const float *x, float *y, int64_t n);

// y[i] = a[i] + b[i] over n elements, in parallel when large.
void add(const float *a, const float *b, float *y, int64_t n);
// Parallel memcpy for large buffers.
void copy(const void *src, void *dst, size_t bytes);

}  // namespace tfmrt::fast
