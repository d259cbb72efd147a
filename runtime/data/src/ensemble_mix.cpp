#include "tfmdata/ensemble_mix.h"

#include <limits>

#include "tfmrt/fast_math.h"

namespace tfmdata::detail {
namespace {

using tfmrt::fastmath::expApprox;
using tfmrt::fastmath::logApprox;

// Blocks of 512 tokens, so the passes over a block reread it from L1.
inline void mixBlocks(const float *const *rows, const float *shifts, const float *weights, int64_t members, int64_t n,
                      float *__restrict out, float *__restrict sums) {
  const float minusInf = -std::numeric_limits<float>::infinity();
  constexpr int64_t kBlock = 512;
  for (int64_t v0 = 0; v0 < n; v0 += kBlock) {
    const int64_t len = n - v0 < kBlock ? n - v0 : kBlock;
    float *__restrict o = out + v0;
    {
      const float *__restrict l = rows[0] + v0;
      const float s = shifts[0];
#pragma omp simd
      for (int64_t v = 0; v < len; ++v) o[v] = l[v] - s;
    }
    for (int64_t i = 1; i < members; ++i) {
      const float *__restrict l = rows[i] + v0;
      const float s = shifts[i];
#pragma omp simd
      for (int64_t v = 0; v < len; ++v) o[v] = o[v] > l[v] - s ? o[v] : l[v] - s;
    }
#pragma omp simd
    for (int64_t v = 0; v < len; ++v) sums[v] = 0.0f;
    for (int64_t i = 0; i < members; ++i) {
      const float *__restrict l = rows[i] + v0;
      const float s = shifts[i], w = weights[i];
#pragma omp simd
      for (int64_t v = 0; v < len; ++v) {
        const float d = (l[v] - s) - o[v];  // <= 0; NaN where o is -inf
        sums[v] += w * expApprox(d < 0.0f ? d : 0.0f);
      }
    }
    // m + log(sum): sum is in [min weight, 1] where m is finite (its own member adds w * 1).
#pragma omp simd
    for (int64_t v = 0; v < len; ++v) {
      const float lg = logApprox(sums[v]);  // evaluated everywhere: a select, not a branch, vectorises
      o[v] = o[v] > minusInf ? o[v] + lg : o[v];
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
#define TFMDATA_HAS_AVX2_BUILD 1
// The same compiled for AVX2 + FMA: 2.7 vs 8.5 ms for 116 rows x 8000 tokens x 2 members on a
// Zen 3 core (the baseline SSE2 build).
__attribute__((target("avx2,fma"))) void mixBlocksAvx2(const float *const *rows, const float *shifts,
                                                        const float *weights, int64_t members, int64_t n, float *out,
                                                        float *sums) {
  mixBlocks(rows, shifts, weights, members, n, out, sums);
}
#endif

}  // namespace

void mixLogProbs(const float *const *rows, const float *shifts, const float *weights, int64_t members, int64_t n,
                 float *out, float *sums) {
#ifdef TFMDATA_HAS_AVX2_BUILD
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2) return mixBlocksAvx2(rows, shifts, weights, members, n, out, sums);
#endif
  mixBlocks(rows, shifts, weights, members, n, out, sums);
}

void mixLogProbsBaseline(const float *const *rows, const float *shifts, const float *weights, int64_t members,
                         int64_t n, float *out, float *sums) {
  mixBlocks(rows, shifts, weights, members, n, out, sums);
}

}  // namespace tfmdata::detail
