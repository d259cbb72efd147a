// The Dnnl backend's gradient kernels against their reference kernels (the reference kernels
// themselves are checked end to end against PyTorch autograd by compiler_tests).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention/attention.h"
#include "kernels/dropout_mask.h"
#include "kernels/gemm/packed_gemm.h"
#include "kernels/gemm/weight_grad.h"
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
  // Sums over batch * len rows: float accumulation against the reference's double. On AVX2 CPUs
  // without AVX-512 our blocked body replaces oneDNN's.
  const bool avx2Body = !attention::cpuHasAvx512() && attention::cpuHasAvx2Fma();
  SingleOp("tfm.weight_grad", {{dy}, {x}}, {}).compare(avx2Body ? "fast.weight_grad_avx2" : "dnnl.weight_grad", 2e-5, 1e-4);
  SingleOp("tfm.bias_grad", {{dy}}, {}).compare("fast.bias_grad", 2e-5, 1e-4);
  Tensor pre = randomF32({s.batch, s.len, s.out}, 53);
  if (pre.numel() > 1) pre.data<float>()[0] = 0.0f;  // relu'(0) = 0, as in PyTorch
  SingleOp("tfm.relu_grad", {{pre}, {dy}}, {}).compare("fast.relu_grad", 0, 0);

  // LayerNorm over rows of `out` features, x off-centre so the row moments matter; float row
  // sums against the reference's double.
  const Tensor lnX = randomF32({s.batch, s.len, s.out}, 57, -3, 5), gamma = randomF32({s.out}, 58, 0.5, 1.5);
  const Attrs eps{{"epsilon", AttrValue::ofFloat(1e-5)}};
  SingleOp("tfm.layer_norm_grad", {{lnX}, {gamma}, {dy}}, eps).compare("fast.layer_norm_grad", 2e-5, 1e-4);
  SingleOp("tfm.layer_norm_gamma_grad", {{lnX}, {dy}}, eps).compare("fast.layer_norm_gamma_grad", 1e-4, 1e-4);

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

// precision "bf16": both operands rounded to bf16 (relative error <= 2^-9 each, products exact
// in f32), so |dW - exact| <= (2^-8 + 2^-18) sum_r |dy x| plus the f32 summation error. The odd
// element counts exercise the conversion's last unpaired element.
TEST_P(FastGradKernels, WeightGradBf16WithinTheRoundingBound) {
  if (!gemm::cpuHasAvx512Bf16()) GTEST_SKIP() << "this CPU has no AVX512-BF16: bf16 weight gradients run in f32";
  const GradShape &s = GetParam();
  const Tensor dy = randomF32({s.batch, s.len, s.out}, 57), x = randomF32({s.batch, s.len, s.in}, 58);
  std::string kernel;
  const Tensor dw = SingleOp("tfm.weight_grad", {{dy}, {x}}, {{"precision", AttrValue::ofString("bf16")}})
                        .run(KernelBackend::Dnnl, &kernel);
  EXPECT_EQ(kernel, "dnnl.weight_grad.bf16");
  const int64_t rows = s.batch * s.len;
  for (int64_t n = 0; n < s.out; ++n)
    for (int64_t k = 0; k < s.in; ++k) {
      double exact = 0, magnitude = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const double p = double(dy.data<float>()[r * s.out + n]) * double(x.data<float>()[r * s.in + k]);
        exact += p;
        magnitude += std::fabs(p);
      }
      ASSERT_NEAR(dw.data<float>()[n * s.in + k], exact,
                  (std::ldexp(1.0, -8) + std::ldexp(1.0, -18)) * magnitude + 1e-6 * double(rows) + 1e-6)
          << n << ", " << k;
    }
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

// The AVX2 weight-gradient body equals the plain fma chains bit for bit: tails of 1-5 dW rows and
// 1-15 columns, one and several row chunks (K = 1030: 47 rows per chunk), and any split of the dW
// rows (as between threads).
TEST(WeightGradAvx2, EqualsTheReferenceBitForBit) {
  if (!attention::cpuHasAvx2Fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA";
  struct Case {
    int64_t r, n, k;
  };
  for (const Case &c : {Case{1, 1, 1}, Case{3, 7, 5}, Case{17, 13, 33}, Case{300, 6, 16}, Case{300, 11, 40},
                        Case{700, 20, 1030}, Case{5, 8000, 3}, Case{513, 64, 256}}) {
    SCOPED_TRACE("R " + std::to_string(c.r) + " N " + std::to_string(c.n) + " K " + std::to_string(c.k));
    const Tensor dy = randomF32({c.r, c.n}, 61), x = randomF32({c.r, c.k}, 62);
    std::vector<float> expected(size_t(c.n * c.k)), got(size_t(c.n * c.k), -1.0f);
    gemm::weightGradReference(dy.data<float>(), x.data<float>(), c.r, c.n, c.k, expected.data());
    for (int64_t split : {c.n, int64_t(6), int64_t(1)}) {
      std::fill(got.begin(), got.end(), -1.0f);
      for (int64_t n0 = 0; n0 < c.n; n0 += split)
        gemm::weightGradRowsAvx2(dy.data<float>(), x.data<float>(), c.r, c.n, c.k, n0, std::min(c.n, n0 + split),
                                 got.data());
      ASSERT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0) << "rows split by " << split;
    }
    // The reference is the sum: against double, within float summation error.
    for (int64_t n = 0; n < c.n; n += std::max<int64_t>(1, c.n / 7))
      for (int64_t k = 0; k < c.k; k += std::max<int64_t>(1, c.k / 7)) {
        double sum = 0, magnitude = 0;
        for (int64_t r = 0; r < c.r; ++r) {
          const double p = double(dy.data<float>()[r * c.n + n]) * double(x.data<float>()[r * c.k + k]);
          sum += p;
          magnitude += std::fabs(p);
        }
        EXPECT_NEAR(expected[size_t(n * c.k + k)], sum, 1.2e-7 * double(c.r) * magnitude) << n << ", " << k;
      }
  }
}

// No positions: the sums are zero (oneDNN is not asked to multiply empty matrices).
TEST(FastGradKernels, EmptyRows) {
  const Tensor dy(DType::F32, {0, 3, 4}), x(DType::F32, {0, 3, 5});
  Tensor w = SingleOp("tfm.weight_grad", {{dy}, {x}}, {}).run(KernelBackend::Dnnl);
  ASSERT_EQ(w.shape, Shape({4, 5}));
  for (int64_t i = 0; i < w.numel(); ++i) EXPECT_EQ(w.data<float>()[i], 0.0f);
  Tensor b = SingleOp("tfm.bias_grad", {{dy}}, {}).run(KernelBackend::Dnnl);
  ASSERT_EQ(b.shape, Shape({4}));
  for (int64_t i = 0; i < b.numel(); ++i) EXPECT_EQ(b.data<float>()[i], 0.0f);
}

}  // namespace
}  // namespace tfmrt::test

namespace tfmrt::test {
namespace {

Attrs dropoutAttrs(double rate, int64_t seed, const std::string &site) {
  return {{"rate", AttrValue::ofFloat(rate)}, {"seed", AttrValue::ofInt(seed)}, {"site", AttrValue::ofString(site)}};
}

Tensor step(int32_t s) { return Tensor::i32({}, {s}); }

// The fast kernel draws exactly the reference kernel's mask; the kept fraction is 1 - rate; kept
// elements are scaled by 1 / (1 - rate).
TEST(TrainingDropout, FastMatchesReferenceAndRate) {
  const Tensor x = randomF32({3, 70001}, 61, 0.5f, 1.5f);  // no zeros: a 0 output means dropped
  for (double rate : {0.1, 0.3}) {
    SingleOp op("tfm.dropout", {{x}, {step(7)}}, dropoutAttrs(rate, 1, "encoder.layers.0.ffn.residual"));
    op.compare("fast.dropout", 0, 0);  // same mask, same float scale: identical bits
    const Tensor y = op.run(KernelBackend::Dnnl);
    int64_t dropped = 0;
    for (int64_t i = 0; i < y.numel(); ++i) {
      if (y.data<float>()[i] == 0.0f) {
        ++dropped;
      } else {
        EXPECT_NEAR(y.data<float>()[i], x.data<float>()[i] / (1.0 - rate), 1e-6) << i;
      }
    }
    const double n = double(y.numel()), sd = std::sqrt(n * rate * (1 - rate));
    EXPECT_NEAR(double(dropped), n * rate, 5 * sd) << "rate " << rate;
  }
}

// The formula, against figures printed by tests/reference/gen_golden.py's independent Python
// implementation (site "encoder.embed", seed 1, step 1, rate 0.1).
TEST(TrainingDropout, MaskFormulaMatchesPythonReference) {
  const uint64_t key = dropout::maskKey(1, "encoder.embed", 1);
  EXPECT_EQ(key, 0x77a1b0160f365c80ull);
  EXPECT_EQ(dropout::dropThreshold(0.1), 1677722u);
  const uint32_t u[4] = {1427074, 7240917, 1711331, 14426216};
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(uint32_t(dropout::splitmix64(key + i * dropout::kGolden) >> 40), u[i]) << i;
  std::string bits;
  for (uint64_t i = 0; i < 16; ++i) bits += dropout::kept(key, i, dropout::dropThreshold(0.1)) ? '1' : '0';
  EXPECT_EQ(bits, "0111100110111111");
}

// The mask is a function of (seed, site, step): each changes it, repeating them repeats it.
TEST(TrainingDropout, MaskDependsOnSeedSiteAndStep) {
  const Tensor x = randomF32({64, 64}, 62, 0.5f, 1.5f);
  auto mask = [&](int64_t seed, const std::string &site, int32_t s) {
    Tensor y = SingleOp("tfm.dropout", {{x}, {step(s)}}, dropoutAttrs(0.5, seed, site)).run(KernelBackend::Dnnl);
    std::string bits;
    for (int64_t i = 0; i < y.numel(); ++i) bits += y.data<float>()[i] == 0.0f ? '0' : '1';
    return bits;
  };
  const std::string base = mask(1, "a", 1);
  EXPECT_EQ(mask(1, "a", 1), base);
  EXPECT_NE(mask(2, "a", 1), base);
  EXPECT_NE(mask(1, "b", 1), base);
  EXPECT_NE(mask(1, "a", 2), base);
}

// Without a step the op is the identity (inference).
TEST(TrainingDropout, StepLessIsIdentity) {
  const Tensor x = randomF32({5, 7}, 63);
  EXPECT_TRUE(allClose(SingleOp("tfm.dropout", {{x}}, {{"rate", AttrValue::ofFloat(0.5)}}).run(KernelBackend::Dnnl), x, 0, 0));
  EXPECT_TRUE(allClose(SingleOp("tfm.dropout", {{x}}, {{"rate", AttrValue::ofFloat(0.5)}}).run(KernelBackend::Reference), x, 0, 0));
}

}  // namespace
}  // namespace tfmrt::test
