// The compiled `gradients` entry (tfm-autodiff) against PyTorch autograd: golden gradients of the
// loss with respect to every parameter (tests/reference/gen_golden.py, float64, dropout off),
// for both tiny specs, both kernel backends, fused and unfused builds.
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

class GradientsTest : public testing::TestWithParam<GoldenCase> {};

TEST_P(GradientsTest, EveryParameterGradientMatchesPyTorchAutograd) {
  const GoldenCase &c = GetParam();
  auto model = compileAndLoad(c.spec, c.backend, c.fusion, /*gradients=*/true);
  ASSERT_TRUE(model);
  const std::string golden = kSource + "/tests/golden/" + c.spec;
  tfmrt::Status status = model->loadWeights(golden + ".weights.safetensors");
  ASSERT_TRUE(status.ok()) << status.message();
  std::map<std::string, tfmrt::Tensor> io, grads;
  ASSERT_TRUE(tfmrt::readSafetensors(golden + ".io.safetensors", io).ok());
  status = tfmrt::readSafetensors(golden + ".grads.safetensors", grads);
  ASSERT_TRUE(status.ok()) << status.message();

  std::vector<tfmrt::Tensor> outputs;
  status = model->run("gradients", {io.at("src"), io.at("tgt_in"), io.at("tgt_out")}, outputs);
  ASSERT_TRUE(status.ok()) << status.message();
  std::vector<std::string> names;
  for (const tfmrt::EntryFunction &fn : model->artifact().functions)
    if (fn.name == "gradients")
      for (uint32_t v : fn.outputs) names.push_back(fn.values[v].name);
  ASSERT_EQ(names.size(), outputs.size());
  ASSERT_EQ(names.size(), grads.size() + 1) << "loss + one gradient per parameter";

  ASSERT_EQ(names[0], "loss");
  const float expectedLoss = io.at("loss").data<float>()[0];
  EXPECT_NEAR(outputs[0].data<float>()[0], expectedLoss, 1e-4 * std::abs(expectedLoss)) << "loss";
  for (size_t i = 1; i < names.size(); ++i) {
    ASSERT_EQ(names[i].rfind("grad:", 0), 0u) << names[i];
    const std::string param = names[i].substr(5);
    auto it = grads.find(param);
    ASSERT_NE(it, grads.end()) << "no golden gradient for " << param;
    // Gradients are sums over many positions: float32 accumulation error relative to the largest
    // gradients (~0.4) stays below 2e-6 here; 1e-3 relative + 2e-6 absolute leaves a margin.
    expectClose(outputs[i], it->second, 1e-3, 2e-6, names[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, GradientsTest, testing::ValuesIn(tfmc::test::allGoldenCases()),
                         tfmc::test::goldenCaseName);

}  // namespace
