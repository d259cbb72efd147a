// Translation search (tfmdata::translateBatch over the encode/decode entries) against an
// independent greedy decoder built on the forward entry: at every step, run forward on the
// prefix and take the argmax of the last position.
#include <algorithm>

#include <gtest/gtest.h>

#include "golden_util.h"
#include "tfmdata/search.h"
#include "tfmrt/safetensors.h"

namespace {

using tfmc::test::compileAndLoad;
using tfmc::test::kSource;

// Greedy over `forward` for one source (ids without EOS), up to maxOut tokens (EOS included).
std::vector<int32_t> greedyViaForward(tfmrt::Model &m, const std::vector<int32_t> &src, int64_t maxOut) {
  std::vector<int32_t> srcIds = src;
  srcIds.push_back(2);
  std::vector<int32_t> out;
  for (int64_t t = 0; t < maxOut; ++t) {
    std::vector<int32_t> in{1};
    in.insert(in.end(), out.begin(), out.end());
    const int64_t T = int64_t(in.size());
    std::vector<tfmrt::Tensor> res;
    tfmrt::Status s = m.run("forward",
                            {tfmrt::Tensor::i32({1, int64_t(srcIds.size())}, srcIds), tfmrt::Tensor::i32({1, T}, in),
                             tfmrt::Tensor::i32({1, T}, std::vector<int32_t>(size_t(T), 0))},
                            res);
    EXPECT_TRUE(s.ok()) << s.message();
    const int64_t V = res[0].shape[2];
    const float *z = res[0].data<float>() + (T - 1) * V;
    const int32_t best = int32_t(std::max_element(z, z + V) - z);
    if (best == 2) break;
    out.push_back(best);
  }
  return out;
}

TEST(Search, GreedyBatchMatchesForwardDecoding) {
  for (const char *spec : {"tiny", "tiny-prenorm"}) {
    auto model = compileAndLoad(spec, tfmrt::KernelBackend::Dnnl, "all", false, false, /*translate=*/true);
    ASSERT_TRUE(model);
    ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/" + spec + ".weights.safetensors").ok());
    // Sources of different lengths in one batch: padding must not change any row's output.
    const std::vector<std::vector<int32_t>> sources{{5, 9, 13, 7, 21}, {30}, {11, 12, 13, 14, 15, 16, 17, 18}, {4, 4}};
    tfmdata::SearchOptions o;
    o.beam = 1;
    o.maxLengthRatio = 1.0;
    o.maxLengthOffset = 3;
    o.maxLen = 32;
    std::vector<std::vector<int32_t>> batched;
    ASSERT_TRUE(tfmdata::translateBatch(*model, sources, o, batched).ok());
    ASSERT_EQ(batched.size(), sources.size());
    size_t generated = 0;
    for (const auto &b : batched) generated += b.size();
    EXPECT_GT(generated, 4u) << "the comparison needs outputs that are not all empty";
    for (size_t i = 0; i < sources.size(); ++i) {
      const int64_t maxOut = int64_t(sources[i].size()) + 3;
      EXPECT_EQ(batched[i], greedyViaForward(*model, sources[i], maxOut)) << spec << " sentence " << i;
      EXPECT_LT(int64_t(batched[i].size()), maxOut + 1);
    }
  }
}

// Beam search is deterministic, and a beam of 1 is greedy.
TEST(Search, BeamIsDeterministicAndBeamOneIsGreedy) {
  auto model = compileAndLoad("tiny", tfmrt::KernelBackend::Dnnl, "all", false, false, true);
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/tiny.weights.safetensors").ok());
  const std::vector<std::vector<int32_t>> sources{{5, 9, 13, 7, 21}, {30, 31, 32}};
  tfmdata::SearchOptions o;
  o.maxLen = 32;
  std::vector<std::vector<int32_t>> a, b, one;
  o.beam = 4;
  ASSERT_TRUE(tfmdata::translateBatch(*model, sources, o, a).ok());
  ASSERT_TRUE(tfmdata::translateBatch(*model, sources, o, b).ok());
  EXPECT_EQ(a, b);
  o.beam = 1;
  ASSERT_TRUE(tfmdata::translateBatch(*model, sources, o, one).ok());
  for (size_t i = 0; i < sources.size(); ++i)
    EXPECT_EQ(one[i], greedyViaForward(*model, sources[i], int64_t(1.5 * sources[i].size()) + 10));
}

}  // namespace
