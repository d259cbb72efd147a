#include "tfmdata/row_top.h"

#if defined(__SSE__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tfmrt/fast_math.h"

namespace tfmdata::detail {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kBlock = 64;  // tokens per block maximum
// Past this many tokens kept (beam 65 and up), topTokens selects (selectTop) rather than keeps a
// sorted list: an entrant costs O(keep) there, and with keep near V nearly every token enters
// (beam 1000 on 8000 tokens: 15 s of search per sentence). Below, the list is faster: search
// time of 40 test_2016 sentences, list / selection, beam 12 0.06 / 0.21 s, 40 0.56 / 0.90 s,
// 128 7.4 / 3.1 s, 300 18.2 / 12.5 s.
constexpr size_t kSelectFrom = 128;

// A lambda, not a function: std::sort and std::nth_element inline it (a function passed by
// pointer stayed an indirect call per comparison).
constexpr auto better = [](const ScoredToken &a, const ScoredToken &b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
};

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

namespace {

// Float bits as an unsigned key in the floats' order; -0 as +0, which it equals (ties).
inline uint32_t orderKey(float x) {
  if (x == 0.0f) x = 0.0f;
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

// topTokens for large `keep`: histograms of the allowed values' key bits, the top 12 then the
// next 12 within the bucket where the keep-th largest falls, give a bound that at least `keep` of
// them reach and few more; only the tokens at or above it are kept and sorted. The same tokens
// in the same order: `better` orders every pair, and every one of the best `keep` is at or
// above the bound.
void selectTop(const float *z, int64_t V, size_t keep, const std::vector<int32_t> &banned,
               std::vector<ScoredToken> &best) {
  constexpr int kBits = 12;
  constexpr uint32_t kBuckets = 1u << kBits;
  thread_local std::vector<uint32_t> keys;  // per allowed token, its key (banned / NaN: 0)
  keys.assign(size_t(V), 0);
  size_t next = 0;  // banned is sorted: walk it alongside
  uint32_t counts[kBuckets] = {};
  size_t total = 0;
  for (int64_t v = 0; v < V; ++v) {
    while (next < banned.size() && banned[next] < v) ++next;
    if ((next < banned.size() && banned[next] == v) || std::isnan(z[v])) continue;
    // An allowed value's key is never 0 (-inf's is 0x007FFFFF): 0 marks the others.
    keys[size_t(v)] = orderKey(z[v]);
    ++counts[keys[size_t(v)] >> (32 - kBits)];
    ++total;
  }
  const size_t want = std::min(keep, total);
  if (want == 0) return;
  // The highest bucket with `want` values at or above it, and how many lie above it.
  auto boundary = [&](size_t before, size_t &above) {
    uint32_t bucket = kBuckets - 1;
    above = before;
    while (above + counts[bucket] < want) above += counts[bucket--];
    return bucket;
  };
  size_t above = 0;
  const uint32_t high = boundary(0, above);
  std::fill(counts, counts + kBuckets, 0u);
  for (const uint32_t key : keys)
    if (key != 0 && key >> (32 - kBits) == high) ++counts[(key >> (32 - 2 * kBits)) & (kBuckets - 1)];
  size_t aboveBoth = 0;
  const uint32_t low = boundary(above, aboveBoth);
  const uint32_t lowestKey = (high << (32 - kBits)) | (low << (32 - 2 * kBits));
  best.reserve(want);
  for (int64_t v = 0; v < V; ++v)
    if (keys[size_t(v)] >= lowestKey) best.push_back({z[v], int32_t(v)});
  if (best.size() > keep) {
    std::nth_element(best.begin(), best.begin() + ptrdiff_t(keep), best.end(), better);
    best.resize(keep);
  }
  std::sort(best.begin(), best.end(), better);
}

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
  if (keep > kSelectFrom) {
    selectTop(z, V, keep, banned, best);
    return;
  }
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
