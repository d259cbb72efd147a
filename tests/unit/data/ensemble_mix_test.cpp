// The ensemble mixture (tfmdata/ensemble_mix.h) and the float exp / log it uses
// (tfmrt/fast_math.h) against double-precision std::exp / std::log.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tfmdata/ensemble_mix.h"
#include "tfmrt/fast_math.h"

namespace {

TEST(EnsembleMix, ExpAndLogMatchTheLibrary) {
  double worstExp = 0, worstLog = 0;
  for (double x = -87.0; x <= 0.0; x += 0.000731) {
    const double want = std::exp(double(float(x)));
    worstExp = std::max(worstExp, std::abs(tfmrt::fastmath::expApprox(float(x)) - want) / want);
  }
  EXPECT_EQ(tfmrt::fastmath::expApprox(0.0f), 1.0f);
  EXPECT_LT(tfmrt::fastmath::expApprox(-std::numeric_limits<float>::infinity()), 1e-37f);
  for (double x = 1e-6; x <= 1e6; x *= 1.000917) {
    const double want = std::log(double(float(x)));
    worstLog = std::max(worstLog, std::abs(tfmrt::fastmath::logApprox(float(x)) - want));
  }
  EXPECT_EQ(tfmrt::fastmath::logApprox(1.0f), 0.0f);
  EXPECT_LT(worstExp, 4e-7) << "relative";
  EXPECT_LT(worstLog, 2e-6) << "absolute, over |log x| <= 14";
}

// Both builds (AVX2 + FMA where the CPU has them, and the baseline). Rows of log-probabilities and
// logits (with their shifts), 1-3 members, uneven weights, -inf entries, and a length that is not
// a multiple of the 512-token block.
TEST(EnsembleMix, MatchesADoublePrecisionMixture) {
  std::mt19937 gen(3);
  std::normal_distribution<float> logit(0.0f, 4.0f);
  const int64_t n = 1300;
  const float minusInf = -std::numeric_limits<float>::infinity();
  for (int members = 1; members <= 3; ++members) {
    SCOPED_TRACE(members);
    const size_t M = static_cast<size_t>(members);
    std::vector<std::vector<float>> rows(M, std::vector<float>(static_cast<size_t>(n)));
    std::vector<float> shifts(M), weights(M);
    for (size_t i = 0; i < M; ++i) {
      for (float &z : rows[i]) z = logit(gen);
      rows[i][7] = minusInf;  // every member rules tokens 7 and 9 out (7 gets member 2's back below)
      rows[i][9] = minusInf;
      double mx = -1e30, sum = 0;
      for (float z : rows[i]) mx = std::max(mx, double(z));
      for (float z : rows[i]) sum += std::exp(double(z) - mx);
      shifts[i] = i % 2 ? float(mx + std::log(sum)) : 0.0f;  // odd members: logits
      if (i % 2 == 0)
        for (float &z : rows[i]) z = float(double(z) - mx - std::log(sum));
      weights[i] = float(i + 1) / float(members * (members + 1) / 2);
    }
    if (members > 1) rows[1][7] = 0.5f;
    std::vector<const float *> ptrs;
    for (auto &r : rows) ptrs.push_back(r.data());
    for (auto mix : {tfmdata::detail::mixLogProbs, tfmdata::detail::mixLogProbsBaseline}) {
      std::vector<float> out(static_cast<size_t>(n)), sums(512);
      mix(ptrs.data(), shifts.data(), weights.data(), members, n, out.data(), sums.data());
      double worst = 0;
      for (int64_t v = 0; v < n; ++v) {
        double p = 0;
        for (size_t i = 0; i < M; ++i) p += double(weights[i]) * std::exp(double(rows[i][size_t(v)]) - double(shifts[i]));
        if (p == 0) {
          EXPECT_EQ(out[size_t(v)], minusInf) << v;
          continue;
        }
        worst = std::max(worst, std::abs(double(out[size_t(v)]) - std::log(p)) / (1 + std::abs(std::log(p))));
      }
      EXPECT_LT(worst, 1e-6);
      EXPECT_EQ(out[9], minusInf);
      EXPECT_EQ(std::isfinite(out[7]), members > 1);
    }
  }
}

// One member, or two equal members with equal weights, give the member's values bit for bit.
TEST(EnsembleMix, OneOrTwoEqualMembersAreExact) {
  std::vector<float> row(777);
  for (size_t v = 0; v < row.size(); ++v) row[v] = -0.013f * float(v) - 1.5f;
  const float *one[1] = {row.data()}, *two[2] = {row.data(), row.data()};
  const float zero[2] = {0, 0}, w1[1] = {1.0f}, w2[2] = {0.5f, 0.5f};
  for (auto mix : {tfmdata::detail::mixLogProbs, tfmdata::detail::mixLogProbsBaseline}) {
    std::vector<float> out(row.size()), sums(512);
    mix(one, zero, w1, 1, int64_t(row.size()), out.data(), sums.data());
    EXPECT_EQ(out, row);
    mix(two, zero, w2, 2, int64_t(row.size()), out.data(), sums.data());
    EXPECT_EQ(out, row);
  }
}

}  // namespace
