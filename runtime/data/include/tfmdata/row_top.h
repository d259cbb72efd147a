// What the search needs of each row of a decoder call (search.cpp): the best few tokens and, for
// a row of logits (the full-prefix decoder's), its log-sum-exp. Both scan a whole vocabulary row
// per hypothesis per step; the log-sum-exp in scalar std::exp was 7 % of a full-prefix greedy run
// (0.21 s of 2.85, test_2016; 0.04 s vectorised).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tfmdata::detail {

using ScoredToken = std::pair<float, int32_t>;  // (value, token)

// The best `keep` tokens of z[0, V), best first (ties: lower id first), none of `banned` (sorted
// ascending); NaN values are never kept. Fewer than `keep` only when fewer tokens are left. Up to
// 128 kept, a sorted list that skips blocks whose maximum cannot enter; more (beam 65+), a
// selection above a histogram bound (row_top.cpp).
void topTokens(const float *z, int64_t V, size_t keep, const std::vector<int32_t> &banned,
               std::vector<ScoredToken> &best);
// The plain scan, every token against the worst kept one: the reference topTokens is tested
// against.
void topTokensScan(const float *z, int64_t V, size_t keep, const std::vector<int32_t> &banned,
                   std::vector<ScoredToken> &best);

// log sum_v exp(z[v]) of a row of logits (the full-prefix decoder's rows): float exp with
// relative error < 2e-7 (tfmrt/fast_math.h), summed in 16 float lanes; the AVX2 + FMA build where
// the CPU has them. -inf for a row of -inf.
double rowLogSumExp(const float *z, int64_t V);
// The same, built for the baseline ISA, for its test.
double rowLogSumExpBaseline(const float *z, int64_t V);

}  // namespace tfmdata::detail
