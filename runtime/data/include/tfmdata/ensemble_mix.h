// The mixture an ensemble's search ranks (search.cpp's EnsembleDecoder): per token v,
//   out[v] = log sum_i w_i exp(rows[i][v] - shifts[i])
// with the rows log-probabilities once shifted (shift 0, or a row of logits' log-sum-exp).
// Computed as m + log sum_i w_i exp(l_i - m), m = max_i l_i, with tfmrt/fast_math.h's float exp
// and log so the loops vectorise (std::exp in double took 16 s of a 23 s beam-4 run of two models
// on test_2016); one member (w = 1) or two equal members (w = 1/2 each) give m bit for bit. A
// token no member gives any probability (m = -inf) stays -inf.
#pragma once

#include <cstdint>

namespace tfmdata::detail {

// `sums`: scratch of 512 floats.
void mixLogProbs(const float *const *rows, const float *shifts, const float *weights, int64_t members, int64_t n,
                 float *out, float *sums);
// The same code built for the baseline ISA (mixLogProbs runs an AVX2 + FMA build where the CPU
// has them), for its test.
void mixLogProbsBaseline(const float *const *rows, const float *shifts, const float *weights, int64_t members,
                         int64_t n, float *out, float *sums);

}  // namespace tfmdata::detail
