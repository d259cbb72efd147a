// The compiled `train_step` entry (training-mode dropout, tfm-autodiff, tfm-apply-adam; weights
// updated in place) against two steps of PyTorch's Adam on the golden batch
// (tests/reference/gen_golden.py: float64, the spec's lr schedule, the same counter-based dropout
// masks), for both tiny specs, both kernel backends, fused and unfused.
//
// Adam's first step moves each weight by about lr * sign(gradient), so where a gradient is at
// float32 noise level (e.g. attention key biases, whose exact gradient is zero: softmax ignores a
// per-query shift) the sign, and so the update, is arbitrary in any float32 implementation.
// Updates are therefore compared where the golden gradient is clearly non-zero, and elsewhere
// only bounded by Adam's step-size bound.
#include <cmath>
#include <map>

#include <gtest/gtest.h>

#include "golden_util.h"
#include "tfmrt/safetensors.h"

namespace {

using tfmc::test::compileAndLoad;
using tfmc::test::GoldenCase;
using tfmc::test::kSource;

// Per element: where the gradients so far are well above float32 noise, |ours - golden| <= tol
// (the new weights); elsewhere |ours - before| <= bound (Adam's update bound for this step).
struct UpdateCheck {
  double worst = 0;  // largest |ours - golden| among compared elements
  int64_t compared = 0, bounded = 0, failures = 0;
};

class TrainStepTest : public testing::TestWithParam<GoldenCase> {};

TEST_P(TrainStepTest, TwoAdamStepsMatchPyTorch) {
  const GoldenCase &c = GetParam();
  auto model = compileAndLoad(c.spec, c.backend, c.fusion, /*gradients=*/false, /*trainStep=*/true);
  ASSERT_TRUE(model);
  const std::string golden = kSource + "/tests/golden/" + c.spec;
  ASSERT_TRUE(model->loadWeights(golden + ".weights.safetensors").ok());
  std::map<std::string, tfmrt::Tensor> io, weights, adam;
  ASSERT_TRUE(tfmrt::readSafetensors(golden + ".io.safetensors", io).ok());
  ASSERT_TRUE(tfmrt::readSafetensors(golden + ".weights.safetensors", weights).ok());
  ASSERT_TRUE(tfmrt::readSafetensors(golden + ".adam.safetensors", adam).ok());
  const float lr[2] = {adam.at("lr1").data<float>()[0], adam.at("lr2").data<float>()[0]};

  for (int step = 1; step <= 2; ++step) {
    std::map<std::string, tfmrt::Tensor> before;
    for (const auto &[name, w] : weights) before[name] = *model->weight(name);
    std::vector<tfmrt::Tensor> out;
    tfmrt::Status s = model->run("train_step",
                                 {io.at("src"), io.at("tgt_in"), io.at("tgt_out"), tfmrt::Tensor::i32({}, {step})}, out);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(out.size(), 2u);
    // The loss of the weights before this step's update.
    const float want = adam.at("loss" + std::to_string(step)).data<float>()[0];
    EXPECT_NEAR(out[0].data<float>()[0], want, 2e-4 * std::abs(want)) << "loss at step " << step;
    if (step == 1) {  // sum of squared gradients, against the golden gradients
      double sq = 0;
      for (const auto &[name, w] : weights) {
        const tfmrt::Tensor &g = adam.at("grad1/" + name);
        for (int64_t i = 0; i < g.numel(); ++i) sq += double(g.data<float>()[i]) * g.data<float>()[i];
      }
      EXPECT_NEAR(out[1].data<float>()[0], sq, 1e-4 * sq) << "grad_sq_norm";
    }

    UpdateCheck r;
    // Step 2's direction mixes both gradients: bias-corrected |m| / sqrt(v) stays below ~2.3.
    // Compared where both steps' gradients are clear of float32 noise.
    const double tol = 2e-3 * lr[step - 1];
    const double bound = (step == 1 ? 1.0 : 2.5) * lr[step - 1] + 1e-7;
    for (const auto &[name, w] : weights) {
      const tfmrt::Tensor &g1 = adam.at("grad1/" + name);
      const tfmrt::Tensor &ours = *model->weight(name), &want = adam.at("step" + std::to_string(step) + "/" + name);
      const tfmrt::Tensor &g2 = adam.at("grad2/" + name);
      for (int64_t i = 0; i < ours.numel(); ++i) {
        const double o = ours.data<float>()[i], w = want.data<float>()[i];
        const bool clear = std::abs(g1.data<float>()[i]) > 1e-5 && (step == 1 || std::abs(g2.data<float>()[i]) > 1e-5);
        if (clear) {
          ++r.compared;
          r.worst = std::max(r.worst, std::abs(o - w));
          if (!(std::abs(o - w) <= tol)) ++r.failures;
        } else {
          ++r.bounded;
          if (!(std::abs(o - before.at(name).data<float>()[i]) <= bound)) ++r.failures;
        }
      }
    }
    EXPECT_EQ(r.failures, 0) << "step " << step << ": worst |ours - PyTorch| " << r.worst << " over " << r.compared
                             << " compared elements (" << r.bounded << " at noise-level gradients only bounded)";
    EXPECT_GT(r.compared, r.bounded) << "most elements must be compared exactly";
    if (step == 1) {
      // Step 2 starts from PyTorch's step-1 weights, keeping our Adam moments: weights whose
      // step-1 gradient was at eps level (|g| ~ 1e-9, where Adam's g / (|g| + eps) turns float32
      // rounding into an lr-sized difference) would otherwise make every later gradient differ.
      std::map<std::string, tfmrt::Tensor> step1;
      for (const auto &[name, w] : weights) step1[name] = adam.at("step1/" + name);
      ASSERT_TRUE(model->setWeights(step1, /*keepTrainingState=*/true).ok());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, TrainStepTest, testing::ValuesIn(tfmc::test::allGoldenCases()),
                         tfmc::test::goldenCaseName);

}  // namespace
