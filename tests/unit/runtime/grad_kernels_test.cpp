// The Dnnl backend's gradient kernels against their reference kernels (the reference kernels
// themselves are checked end to end against PyTorch autograd by compiler_tests).
#include "test_util.h"

namespace tfmrt::test {
namespace {

struct GradShape {
  int64_t batch, len, in, out;  // dy [batch, len, out], x [batch, len, in]
};

class FastGradKernels : public ::testing::TestWithParam<GradShape> {};

TEST_P(FastGradKernels, MatchReference) {
  const GradShape &s = GetParam();
  const Tensor dy = randomF32({s.batch, s.len, s.out}, 51), x = randomF32({s.batch, s.len, s.in}, 52);
  // Sums over batch * len rows: float accumulation against the reference's double.
  SingleOp("tfm.weight_grad", {{dy}, {x}}, {}).compare("dnnl.weight_grad", 2e-5, 1e-4);
  SingleOp("tfm.bias_grad", {{dy}}, {}).compare("fast.bias_grad", 2e-5, 1e-4);
  Tensor pre = randomF32({s.batch, s.len, s.out}, 53);
  if (pre.numel() > 1) pre.data<float>()[0] = 0.0f;  // relu'(0) = 0, as in PyTorch
  SingleOp("tfm.relu_grad", {{pre}, {dy}}, {}).compare("fast.relu_grad", 0, 0);

  // Repeated ids (the scatter-add must accumulate), small vocabulary.
  const int64_t vocab = 1 + s.in % 13;
  SingleOp("tfm.embedding_grad", {{randomIds({s.batch, s.len}, 0, int32_t(vocab), 56)}, {dy}},
           {{"num_rows", AttrValue::ofInt(vocab)}})
      .compare("fast.embedding_grad", 2e-5, 1e-4);

  // Logits with a wide range, some pad targets (id 0), and a row whose target is the pad id only.
  const Tensor logits = randomF32({s.batch, s.len, s.out}, 54, -12, 12);
  Tensor targets = randomIds({s.batch, s.len}, 0, int32_t(s.out), 55);
  for (double smoothing : {0.0, 0.1})
    SingleOp("tfm.label_smoothed_xent_grad", {{logits}, {targets}},
             {{"smoothing", AttrValue::ofFloat(smoothing)}, {"pad_id", AttrValue::ofInt(0)}})
        .compare("fast.label_smoothed_xent_grad", 1e-7, 1e-5);
}

// Rows straddle kParallelMinElements so the serial and parallel paths of bias_grad both run.
INSTANTIATE_TEST_SUITE_P(Shapes, FastGradKernels,
                         ::testing::Values(GradShape{1, 1, 1, 3}, GradShape{2, 3, 5, 7}, GradShape{3, 17, 33, 65},
                                           GradShape{4, 64, 48, 300}, GradShape{2, 9, 512, 1031}),
                         [](const ::testing::TestParamInfo<GradShape> &info) {
                           const GradShape &s = info.param;
                           return "B" + std::to_string(s.batch) + "_L" + std::to_string(s.len) + "_K" +
                                  std::to_string(s.in) + "_N" + std::to_string(s.out);
                         });

// No positions: the sums are zero (oneDNN is not asked to multiply empty matrices).
TEST(FastGradKernels, EmptyRows) {
  const Tensor dy(DType::F32, {0, 3, 4}), x(DType::F32, {0, 3, 5});
  Tensor w = SingleOp("tfm.weight_grad", {{dy}, {x}}, {}).run(KernelBackend::Dnnl);
  ASSERT_EQ(w.shape, Shape({4, 5}));
  for (int64_t i = 0; i < w.numel(); ++i) EXPECT_EQ(w.data<float>()[i], 0.0f);
  Tensor b = SingleOp("tfm.bias_grad", {{dy}}, {}).run(KernelBackend::Dnnl);
  for (int64_t i = 0; i < b.numel(); ++i) EXPECT_EQ(b.data<float>()[i], 0.0f);
}

}  // namespace
}  // namespace tfmrt::test
