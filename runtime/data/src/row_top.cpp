#include "tfmdata/row_top.h"

#if defined(__SSE__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>

#include "tfmrt/fast_math.h"

namespace tfmdata::detail {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kBlock = 64;  // tokens per block maximum

bool better(const ScoredToken &a, const ScoredToken &b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// Into the sorted `best` (at most `keep` long) if it ranks there.
inline void offer(std::vector<ScoredToken> &best, size_t keep, float value, int32_t token) {
  const ScoredToken c{value, token};
  best.insert(std::upper_bound(best.begin(), best.end(), c, better), c);
  if (best.size() > keep) best.pop_back();
}

// The largest of z[0..n) (NaN ignored; -inf if none), with SSE (x86-64's baseline): a single
// `m = max(m, z[v])` chain is one dependent maxss per token (GCC keeps a float reduction's order,
// so `omp simd` left it scalar).
float blockMaximum(const float *z, int64_t n) {
  float best = kMinusInf;
  int64_t v = 0;
#if defined(__SSE__)
  // maxps(x, m) returns m where x is NaN, as the scalar loop below ignores NaN.
  __m128 m0 = _mm_set1_ps(best), m1 = m0;
  for (; v + 8 <= n; v += 8) {
    m0 = _mm_max_ps(_mm_loadu_ps(z + v), m0);
    m1 = _mm_max_ps(_mm_loadu_ps(z + v + 4), m1);
  }
  m0 = _mm_max_ps(m0, m1);
  m0 = _mm_max_ps(m0, _mm_movehl_ps(m0, m0));
  m0 = _mm_max_ss(m0, _mm_shuffle_ps(m0, m0, 1));
  best = _mm_cvtss_f32(m0);
#endif
  for (; v < n; ++v) best = z[v] > best ? z[v] : best;
  return best;
}

inline double logSumExp(const float *z, int64_t V) {
  float mx = kMinusInf;
#pragma omp simd reduction(max : mx)
  for (int64_t v = 0; v < V; ++v) mx = z[v] > mx ? z[v] : mx;
  if (!(mx > kMinusInf)) return double(mx);  // a row of -inf (or empty)
  constexpr int kLanes = 16;
  float lanes[kLanes] = {};
  int64_t v = 0;
  for (; v + kLanes <= V; v += kLanes) {
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) lanes[j] += tfmrt::fastmath::expApprox(z[v + j] - mx);
  }
  double sum = 0;
  for (; v < V; ++v) sum += tfmrt::fastmath::expApprox(z[v] - mx);
  for (float s : lanes) sum += s;
  return double(mx) + std::log(sum);
}

#if defined(__GNUC__) && defined(__x86_64__)
#define TFMDATA_HAS_AVX2_BUILD 1
__attribute__((target("avx2,fma"))) double logSumExpAvx2(const float *z, int64_t V) { return logSumExp(z, V); }
#endif

}  // namespace

namespace {

// The best `keep` so far, sorted. Once `keep` are kept, a token enters only if it beats the worst
// (ties: the lower id, already kept): one comparison each.
struct Kept {
  std::vector<ScoredToken> &best;
  size_t keep;
  const std::vector<int32_t> &banned;
  float worst = kMinusInf;
  bool full = false;
  void take(const float *z, int64_t v) {
    if (full ? !(z[v] > worst) : std::isnan(z[v])) return;
    if (std::binary_search(banned.begin(), banned.end(), int32_t(v))) return;
    offer(best, keep, z[v], int32_t(v));
    full = best.size() == keep;
    if (full) worst = best.back().first;
  }
};

}  // namespace

void topTokensScan(const float *z, int64_t V, size_t keep, const std::vector<int32_t> &banned,
                   std::vector<ScoredToken> &best) {
  best.clear();
  if (keep == 0) return;
  Kept kept{best, keep, banned};
  for (int64_t v = 0; v < V; ++v) kept.take(z, v);
}

void topTokens(const float *z, int64_t V, size_t keep, const std::vector<int32_t> &banned,
               std::vector<ScoredToken> &best) {
  best.clear();
  if (keep == 0) return;
  // As topTokensScan, but once `keep` are kept a block of 64 whose maximum cannot enter is
  // skipped: on a trained model's log-probabilities the first blocks set a threshold that few
  // later blocks reach (0.5 us per 8000-token row for keep 1, 0.9 for keep 8, rows in L2; a
  // threshold from all the block maxima first was 10 % slower there).
  Kept kept{best, keep, banned};
  for (int64_t v0 = 0; v0 < V; v0 += kBlock) {
    const int64_t v1 = std::min(V, v0 + kBlock);
    if (kept.full && !(blockMaximum(z + v0, v1 - v0) > kept.worst)) continue;
    for (int64_t v = v0; v < v1; ++v) kept.take(z, v);
  }
}

double rowLogSumExp(const float *z, int64_t V) {
#ifdef TFMDATA_HAS_AVX2_BUILD
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2) return logSumExpAvx2(z, V);
#endif
  return logSumExp(z, V);
}

double rowLogSumExpBaseline(const float *z, int64_t V) { return logSumExp(z, V); }

}  // namespace tfmdata::detail
