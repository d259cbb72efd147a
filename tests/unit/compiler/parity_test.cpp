// The compiled forward pass against golden data from the PyTorch reference
// (tests/reference/gen_golden.py): padded batches, padding + causal + memory masks, both kernel
// backends. Runs without PyTorch.
#include <cmath>
#include <map>

#include <gtest/gtest.h>

#include "golden_util.h"
#include "tfmrt/safetensors.h"

namespace {

using tfmc::test::compileAndLoad;
using tfmc::test::expectClose;
using tfmc::test::GoldenCase;
using tfmc::test::kSource;

class ParityTest : public testing::TestWithParam<GoldenCase> {};

TEST_P(ParityTest, LogitsAndLossMatchPyTorchReference) {
  const GoldenCase &c = GetParam();
  auto model = compileAndLoad(c.spec, c.backend, c.fusion);
  ASSERT_TRUE(model);
  const std::string golden = kSource + "/tests/golden/" + c.spec;
  tfmrt::Status status = model->loadWeights(golden + ".weights.safetensors");
  ASSERT_TRUE(status.ok()) << status.message();

  std::map<std::string, tfmrt::Tensor> io;
  status = tfmrt::readSafetensors(golden + ".io.safetensors", io);
  ASSERT_TRUE(status.ok()) << status.message();
  std::vector<tfmrt::Tensor> outputs;
  status = model->run("forward", {io.at("src"), io.at("tgt_in"), io.at("tgt_out")}, outputs);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(outputs.size(), 2u);

  expectClose(outputs[0], io.at("logits"), 1e-4, 1e-5, "logits");
  const float loss = outputs[1].data<float>()[0];
  const float expectedLoss = io.at("loss").data<float>()[0];
  EXPECT_NEAR(loss, expectedLoss, 1e-4 * std::abs(expectedLoss)) << "loss";
}

// A row run alone, trimmed to its own lengths, must give the same logits as inside the padded
// batch: padding masks really mask, and new shapes run without recompiling.
TEST_P(ParityTest, PaddedRowMatchesRowRunAlone) {
  const GoldenCase &c = GetParam();
  auto model = compileAndLoad(c.spec, c.backend, c.fusion);
  ASSERT_TRUE(model);
  const std::string golden = kSource + "/tests/golden/" + c.spec;
  ASSERT_TRUE(model->loadWeights(golden + ".weights.safetensors").ok());
  std::map<std::string, tfmrt::Tensor> io;
  ASSERT_TRUE(tfmrt::readSafetensors(golden + ".io.safetensors", io).ok());
  const tfmrt::Tensor &src = io.at("src"), &tgtIn = io.at("tgt_in"), &tgtOut = io.at("tgt_out");
  const tfmrt::Tensor &logits = io.at("logits");
  const int64_t B = src.shape[0], S = src.shape[1], T = tgtIn.shape[1], V = logits.shape[2];

  for (int64_t b = 0; b < B; ++b) {
    auto length = [&](const tfmrt::Tensor &ids, int64_t width) {
      int64_t n = 0;
      for (int64_t i = 0; i < width; ++i)
        if (ids.data<int32_t>()[b * width + i] != 0) n = i + 1;
      return n;
    };
    const int64_t srcLen = length(src, S), tgtLen = length(tgtIn, T);
    auto row = [&](const tfmrt::Tensor &ids, int64_t width, int64_t len) {
      std::vector<int32_t> v(ids.data<int32_t>() + b * width, ids.data<int32_t>() + b * width + len);
      return tfmrt::Tensor::i32({1, len}, v);
    };
    std::vector<tfmrt::Tensor> outputs;
    tfmrt::Status status = model->run(
        "forward", {row(src, S, srcLen), row(tgtIn, T, tgtLen), row(tgtOut, T, tgtLen)}, outputs);
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_EQ(outputs[0].shape, (std::vector<int64_t>{1, tgtLen, V}));
    for (int64_t t = 0; t < tgtLen; ++t)
      for (int64_t v = 0; v < V; ++v) {
        float expected = logits.data<float>()[(b * T + t) * V + v];
        float actual = outputs[0].data<float>()[t * V + v];
        ASSERT_NEAR(actual, expected, 1e-4 * std::abs(expected) + 1e-5)
            << "row " << b << " position " << t << " vocab " << v;
      }
  }
}

// The translation entries compute the same function: encode once, then decode over each target
// prefix gives the golden logits of its last position (padded rows included).
TEST_P(ParityTest, EncodeThenDecodeMatchesPyTorchReference) {
  const GoldenCase &c = GetParam();
  auto model = compileAndLoad(c.spec, c.backend, c.fusion, false, false, /*translate=*/true);
  ASSERT_TRUE(model);
  const std::string golden = kSource + "/tests/golden/" + c.spec;
  ASSERT_TRUE(model->loadWeights(golden + ".weights.safetensors").ok());
  std::map<std::string, tfmrt::Tensor> io;
  ASSERT_TRUE(tfmrt::readSafetensors(golden + ".io.safetensors", io).ok());
  std::vector<tfmrt::Tensor> memory, logits;
  tfmrt::Status s = model->run("encode", {io.at("src")}, memory);
  ASSERT_TRUE(s.ok()) << s.message();
  const tfmrt::Tensor &tgtIn = io.at("tgt_in"), &want = io.at("logits");
  const int64_t B = tgtIn.shape[0], T = tgtIn.shape[1], V = want.shape[2];
  for (int64_t t = 1; t <= T; ++t) {  // prefixes of length t: positions 0 .. t-1
    std::vector<int32_t> prefix;
    for (int64_t b = 0; b < B; ++b)
      prefix.insert(prefix.end(), tgtIn.data<int32_t>() + b * T, tgtIn.data<int32_t>() + b * T + t);
    s = model->run("decode", {io.at("src"), memory[0], tfmrt::Tensor::i32({B, t}, prefix)}, logits);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(logits[0].shape, (std::vector<int64_t>{B, 1, V}));
    tfmrt::Tensor expected(tfmrt::DType::F32, {B, 1, V});
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(want.data<float>() + (b * T + t - 1) * V, V, expected.data<float>() + b * V);
    expectClose(logits[0], expected, 1e-4, 1e-5, "logits of position " + std::to_string(t - 1));
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, ParityTest, testing::ValuesIn(tfmc::test::allGoldenCases()),
                         tfmc::test::goldenCaseName);

}  // namespace
