// The search's per-row scans (tfmdata/row_top.h): topTokens (blocks whose maximum cannot enter
// skipped; a histogram-bounded selection past 128 kept) and the plain scan against a sort of the whole row, and rowLogSumExp against a double-precision
// sum of std::exp.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tfmdata/row_top.h"

namespace {

using tfmdata::detail::ScoredToken;

// The best `keep` by sorting every kept token (value descending, then id ascending).
std::vector<ScoredToken> sortedBest(const std::vector<float> &z, size_t keep, const std::vector<int32_t> &banned) {
  std::vector<ScoredToken> all;
  for (size_t v = 0; v < z.size(); ++v)
    if (!std::isnan(z[v]) && !std::binary_search(banned.begin(), banned.end(), int32_t(v)))
      all.push_back({z[v], int32_t(v)});
  std::sort(all.begin(), all.end(), [](const ScoredToken &a, const ScoredToken &b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  if (all.size() > keep) all.resize(keep);
  return all;
}

// Rows of random logits, ties across and inside blocks, the best tokens banned, -inf and NaN
// entries, lengths that are and are not multiples of the 64-token block, and
// rows too short for blocks.
TEST(RowTop, TopTokensEqualsSortingTheRow) {
  std::mt19937 gen(11);
  std::normal_distribution<float> logit(0.0f, 3.0f);
  const float minusInf = -std::numeric_limits<float>::infinity();
  std::vector<ScoredToken> got, scan;
  int cases = 0;
  for (int64_t V : {3, 70, 640, 1000, 8000}) {
    for (int pattern = 0; pattern < 7; ++pattern) {
      std::vector<float> z(static_cast<size_t>(V));
      for (float &x : z) x = logit(gen);
      std::vector<int32_t> banned = {0, 1};
      if (pattern == 1)  // coarse values: many ties, some between blocks
        for (float &x : z) x = std::round(x);
      if (pattern == 2) {  // the best tokens banned: fewer than keep survive the block threshold
        std::vector<ScoredToken> top = sortedBest(z, 12, {});
        for (const auto &t : top) banned.push_back(t.second);
        std::sort(banned.begin(), banned.end());
        banned.erase(std::unique(banned.begin(), banned.end()), banned.end());
      }
      if (pattern == 3)  // most of the row ruled out
        for (size_t v = 0; v < z.size(); v += 1 + v % 3) z[v] = minusInf;
      if (pattern == 4)
        for (size_t v = 5; v < z.size(); v += 97) z[v] = std::numeric_limits<float>::quiet_NaN();
      if (pattern == 5)  // one value everywhere: the lowest ids win
        std::fill(z.begin(), z.end(), -2.5f);
      if (pattern == 6)  // few values, signed zeros among them (-0 ties with +0)
        for (size_t v = 0; v < z.size(); ++v) z[v] = std::array<float, 4>{-0.0f, 0.0f, 1.0f, -1.0f}[(v * 7 + v / 3) % 4];
      // Past 128: the selection large beams take (2K kept per row).
      for (size_t keep : {size_t(1), size_t(2), size_t(8), size_t(16), size_t(128), size_t(129), size_t(2000), size_t(9000)}) {
        SCOPED_TRACE(testing::Message() << "V " << V << " pattern " << pattern << " keep " << keep);
        const std::vector<ScoredToken> want = sortedBest(z, keep, banned);
        tfmdata::detail::topTokens(z.data(), V, keep, banned, got);
        tfmdata::detail::topTokensScan(z.data(), V, keep, banned, scan);
        EXPECT_EQ(got, want);
        EXPECT_EQ(scan, want);
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 5 * 7 * 8);
}

TEST(RowTop, LogSumExpMatchesDoublePrecision) {
  std::mt19937 gen(5);
  std::normal_distribution<float> logit(0.0f, 4.0f);
  for (int64_t V : {1, 15, 16, 17, 1000, 8000}) {
    std::vector<float> z(static_cast<size_t>(V));
    for (float &x : z) x = logit(gen) + 30.0f;  // logits, not log-probabilities
    if (V > 3) z[2] = -std::numeric_limits<float>::infinity();
    double mx = -1e300, sum = 0;
    for (float x : z) mx = std::max(mx, double(x));
    for (float x : z) sum += std::exp(double(x) - mx);
    const double want = mx + std::log(sum);
    for (auto lse : {tfmdata::detail::rowLogSumExp, tfmdata::detail::rowLogSumExpBaseline}) {
      SCOPED_TRACE(V);
      EXPECT_NEAR(lse(z.data(), V), want, 4e-6 * std::abs(want) + 1e-6);
    }
  }
  const std::vector<float> none(10, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(tfmdata::detail::rowLogSumExp(none.data(), 10), -std::numeric_limits<double>::infinity());
}

}  // namespace
