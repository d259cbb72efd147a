// Every oneDNN / fast kernel against its reference kernel (odd sizes, M = 1, empty batches, fully
// masked softmax rows), plus hand-computed checks of the reference kernels themselves. Kernels run
// inside single-node Models so they see exactly what they see in production.
#include <cmath>
#include <limits>

#include "shape_inference.h"
#include "test_util.h"

namespace tfmrt::test {
namespace {

const float kInf = std::numeric_limits<float>::infinity();

Attrs transposeB(bool t) { return {{"transpose_b", AttrValue::ofInt(t ? 1 : 0)}}; }

// --- oneDNN matmul -------------------------------------------------------------------------

struct MatmulCase {
  Shape a;
  int64_t n;
  bool transpose;
  bool weightIsParam;
  bool packed = false;  // weight_layout = packed (param weights only)
};

class DnnlMatmul : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(DnnlMatmul, MatchesReference) {
  const MatmulCase &c = GetParam();
  const int64_t k = c.a.back();
  Shape bShape = c.transpose ? Shape{c.n, k} : Shape{k, c.n};
  Attrs attrs = transposeB(c.transpose);
  if (c.packed) attrs["weight_layout"] = AttrValue::ofString("packed");
  SingleOp op("tfm.matmul", {{randomF32(c.a, 1)}, {randomF32(bShape, 2), c.weightIsParam}}, attrs, DType::F32);
  op.compare(c.packed ? "dnnl.matmul.packed" : "dnnl.matmul.plain", 1e-5 * double(k) + 1e-6, 1e-4);
}

std::vector<MatmulCase> matmulCases() {
  std::vector<MatmulCase> cases;
  for (bool t : {false, true})
    for (auto [p, packed] : std::vector<std::pair<bool, bool>>{{false, false}, {true, false}, {true, true}})
      for (auto [a, n] : std::vector<std::pair<Shape, int64_t>>{{{1, 1}, 1},
                                                                 {{1, 7}, 5},
                                                                 {{1, 64}, 33},
                                                                 {{3, 17}, 13},
                                                                 {{37, 64}, 129},
                                                                 {{2, 5, 31}, 17},
                                                                 {{4, 9, 96}, 256},
                                                                 {{0, 8}, 4},
                                                                 {{5, 0}, 3}})
        cases.push_back({a, n, t, p, packed});
  return cases;
}

std::string matmulName(const ::testing::TestParamInfo<MatmulCase> &info) {
  std::string s;
  for (int64_t d : info.param.a) s += std::to_string(d) + "x";
  s += "N" + std::to_string(info.param.n) + (info.param.transpose ? "_bT" : "_b") +
       (info.param.weightIsParam ? "_param" : "_input") + (info.param.packed ? "_packed" : "");
  return s;
}

INSTANTIATE_TEST_SUITE_P(Shapes, DnnlMatmul, ::testing::ValuesIn(matmulCases()), matmulName);

// The runtime M changes across calls; packed weights follow weight updates.
class DnnlMatmulState : public ::testing::TestWithParam<bool> {};

TEST_P(DnnlMatmulState, RuntimeMAndWeightUpdates) {
  Artifact art;
  FunctionBuilder f(art, "forward");
  uint32_t x = f.input("x", DType::F32, {kDyn, 24});
  uint32_t w = f.param("w", {40, 24});
  Attrs attrs = transposeB(true);
  attrs["weight_layout"] = AttrValue::ofString(GetParam() ? "packed" : "plain");
  f.output(f.op("tfm.matmul", {x, w}, DType::F32, {kDyn, 40}, attrs));
  f.finish();
  auto fast = loadModel(art, KernelBackend::Dnnl);
  auto ref = loadModel(art, KernelBackend::Reference);
  ASSERT_TRUE(fast && ref);
  EXPECT_EQ(fast->kernelName("forward", 0), GetParam() ? "dnnl.matmul.packed" : "dnnl.matmul.plain");
  for (int version = 0; version < 2; ++version) {
    std::map<std::string, Tensor> weights{{"w", randomF32({40, 24}, 100 + version)}};
    ASSERT_OK(fast->setWeights(weights));
    ASSERT_OK(ref->setWeights(weights));
    for (int64_t m : {1, 7, 64, 1, 7}) {
      std::vector<Tensor> in{randomF32({m, 24}, uint64_t(m)), }, a, b;
      ASSERT_OK(fast->run("forward", in, a));
      ASSERT_OK(ref->run("forward", in, b));
      EXPECT_TRUE(allClose(a[0], b[0], 1e-4, 1e-4)) << "version " << version << " M " << m;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, DnnlMatmulState, ::testing::Bool(),
                         [](const auto &info) { return std::string(info.param ? "packed" : "plain"); });

// --- oneDNN batch matmul -------------------------------------------------------------------

struct BmmCase {
  Shape a;  // [..., M, K]
  int64_t n;
  bool transpose;
};

class DnnlBatchMatmul : public ::testing::TestWithParam<BmmCase> {};

TEST_P(DnnlBatchMatmul, MatchesReference) {
  const BmmCase &c = GetParam();
  Shape b = c.a;
  const int64_t k = c.a.back();
  b[b.size() - 2] = c.transpose ? c.n : k;
  b[b.size() - 1] = c.transpose ? k : c.n;
  SingleOp op("tfm.batch_matmul", {{randomF32(c.a, 3)}, {randomF32(b, 4)}}, transposeB(c.transpose), DType::F32);
  op.compare("dnnl.batch_matmul", 1e-5 * double(k) + 1e-6, 1e-4);
}

std::vector<BmmCase> bmmCases() {
  std::vector<BmmCase> cases;
  for (bool t : {false, true})
    for (auto [a, n] : std::vector<std::pair<Shape, int64_t>>{{{1, 1, 1, 1}, 1},
                                                               {{2, 4, 9, 8}, 9},
                                                               {{3, 2, 1, 16}, 7},
                                                               {{2, 8, 13, 64}, 13},
                                                               {{1, 3, 5, 7}, 11},
                                                               {{6, 1, 5, 3}, 4},
                                                               {{0, 4, 3, 2}, 3}})
      cases.push_back({a, n, t});
  return cases;
}

std::string bmmName(const ::testing::TestParamInfo<BmmCase> &info) {
  std::string s;
  for (int64_t d : info.param.a) s += std::to_string(d) + "x";
  return s + "N" + std::to_string(info.param.n) + (info.param.transpose ? "_bT" : "_b");
}

INSTANTIATE_TEST_SUITE_P(Shapes, DnnlBatchMatmul, ::testing::ValuesIn(bmmCases()), bmmName);

// One Model, growing key length (decoding-like): the run-time-dims primitive serves them all.
TEST(DnnlBatchMatmulState, ChangingDimsAcrossCalls) {
  Artifact art;
  FunctionBuilder f(art, "forward");
  uint32_t q = f.input("q", DType::F32, {kDyn, 2, kDyn, 8});
  uint32_t k = f.input("k", DType::F32, {kDyn, 2, kDyn, 8});
  f.output(f.op("tfm.batch_matmul", {q, k}, DType::F32, {kDyn, 2, kDyn, kDyn}, transposeB(true)));
  f.finish();
  auto fast = loadModel(art, KernelBackend::Dnnl);
  auto ref = loadModel(art, KernelBackend::Reference);
  for (int64_t len : {1, 2, 3, 9, 2}) {
    std::vector<Tensor> in{randomF32({3, 2, 1, 8}, 1), randomF32({3, 2, len, 8}, uint64_t(len))}, a, b;
    ASSERT_OK(fast->run("forward", in, a));
    ASSERT_OK(ref->run("forward", in, b));
    EXPECT_TRUE(allClose(a[0], b[0], 1e-5, 1e-4)) << "len " << len;
  }
}

// --- oneDNN softmax ------------------------------------------------------------------------

class DnnlSoftmax : public ::testing::TestWithParam<Shape> {};

TEST_P(DnnlSoftmax, MatchesReferenceWithMaskedEntries) {
  Tensor x = randomF32(GetParam(), 5, -8.0f, 8.0f);
  const int64_t n = x.shape.back(), rows = n ? x.numel() / n : 0;
  for (int64_t r = 0; r < rows; ++r) {
    float *row = x.data<float>() + r * n;
    if (r % 3 == 1)
      for (int64_t j = 0; j < n; ++j) row[j] = -kInf;  // fully masked row
    else if (r % 3 == 2)
      for (int64_t j = 0; j < n; j += 2) row[j] = -kInf;  // partly masked (first element too)
  }
  SingleOp op("tfm.softmax", {{x}}, {}, DType::F32);
  op.compare("dnnl.softmax", 1e-6, 1e-5);
  Tensor y = op.run(KernelBackend::Dnnl);
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    bool fullyMasked = true;
    for (int64_t j = 0; j < n; ++j) {
      float v = y.data<float>()[r * n + j];
      ASSERT_FALSE(std::isnan(v)) << "row " << r;
      sum += v;
      fullyMasked = fullyMasked && x.data<float>()[r * n + j] == -kInf;
    }
    EXPECT_NEAR(sum, fullyMasked ? 0.0 : 1.0, 1e-5) << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DnnlSoftmax,
                         ::testing::Values(Shape{1, 1}, Shape{3, 7}, Shape{4, 1}, Shape{2, 4, 5, 33}, Shape{301, 17},
                                           Shape{6, 512}, Shape{0, 5}));

// --- fast layer norm -----------------------------------------------------------------------

class FastLayerNorm : public ::testing::TestWithParam<std::pair<Shape, double>> {};

TEST_P(FastLayerNorm, MatchesReference) {
  auto [shape, eps] = GetParam();
  const int64_t n = shape.back();
  SingleOp op("tfm.layer_norm",
              {{randomF32(shape, 6, -3.0f, 5.0f)}, {randomF32({n}, 7, 0.5f, 1.5f), true}, {randomF32({n}, 8), true}},
              {{"epsilon", AttrValue::ofFloat(eps)}}, DType::F32);
  op.compare("fast.layer_norm", 2e-5, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FastLayerNorm,
                         ::testing::Values(std::make_pair(Shape{1, 1}, 1e-5), std::make_pair(Shape{3, 7}, 1e-5),
                                           std::make_pair(Shape{2, 5, 512}, 1e-5), std::make_pair(Shape{4, 1000}, 1e-12),
                                           std::make_pair(Shape{17}, 1e-5), std::make_pair(Shape{0, 8}, 1e-5)));

// --- fast label-smoothed cross-entropy ----------------------------------------------------

// Wide logit ranges and vocabularies past the 4096-term chunking, with pad positions.
class FastXent : public ::testing::TestWithParam<std::tuple<Shape, double, float>> {};

TEST_P(FastXent, MatchesReference) {
  auto [shape, smoothing, spread] = GetParam();
  const int64_t V = shape.back(), positions = shape[0] * shape[1];
  std::vector<int32_t> targets(positions);
  for (int64_t p = 0; p < positions; ++p) targets[p] = p % 3 == 2 ? 0 : int32_t((p * 7919 + 11) % V);
  SingleOp op("tfm.label_smoothed_xent",
              {{randomF32(shape, 21, -spread, spread)}, {Tensor::i32({shape[0], shape[1]}, targets)}},
              {{"smoothing", AttrValue::ofFloat(smoothing)}, {"pad_id", AttrValue::ofInt(0)}}, DType::F32);
  op.compare("fast.label_smoothed_xent", 1e-5, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FastXent,
                         ::testing::Values(std::make_tuple(Shape{1, 1, 5}, 0.1, 3.0f),
                                           std::make_tuple(Shape{3, 7, 61}, 0.0, 10.0f),
                                           std::make_tuple(Shape{2, 9, 4097}, 0.1, 30.0f),
                                           std::make_tuple(Shape{4, 16, 37000}, 0.1, 8.0f)));

// --- reference kernels against hand-computed values ----------------------------------------

Tensor runRef(const std::string &op, std::vector<Operand> operands, Attrs attrs = {}, DType type = DType::F32) {
  return SingleOp(op, operands, std::move(attrs), type).run(KernelBackend::Reference);
}

TEST(ReferenceKernels, Elementwise) {
  Tensor x = Tensor::f32({4}, {-1.0f, 0.0f, 1.0f, 2.5f});
  EXPECT_TRUE(allClose(runRef("tfm.relu", {{x}}), Tensor::f32({4}, {0, 0, 1, 2.5f}), 0, 0));
  EXPECT_TRUE(allClose(runRef("tfm.gelu", {{x}}),
                       Tensor::f32({4}, {-0.15865525f, 0.0f, 0.84134475f, 2.48447353f}), 1e-6, 1e-6));
  EXPECT_TRUE(allClose(runRef("tfm.scale", {{x}}, {{"factor", AttrValue::ofFloat(-2)}}),
                       Tensor::f32({4}, {2, 0, -2, -5}), 0, 0));
  EXPECT_TRUE(allClose(runRef("tfm.dropout", {{x}}, {{"rate", AttrValue::ofFloat(0.3)}}), x, 0, 0));
  EXPECT_TRUE(allClose(runRef("tfm.add", {{x}, {x}}), Tensor::f32({4}, {-2, 0, 2, 5}), 0, 0));
  Tensor m = Tensor::f32({2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(allClose(runRef("tfm.bias_add", {{m}, {Tensor::f32({2}, {10, 20}), true}}),
                       Tensor::f32({2, 2}, {11, 22, 13, 24}), 0, 0));
}

TEST(ReferenceKernels, MatmulByHand) {
  Tensor a = Tensor::f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::f32({3, 2}, {1, 0, 0, 1, 1, 1});
  EXPECT_TRUE(allClose(runRef("tfm.matmul", {{a}, {b}}, transposeB(false)), Tensor::f32({2, 2}, {4, 5, 10, 11}), 0, 0));
  Tensor bt = Tensor::f32({2, 3}, {1, 0, 1, 0, 1, 1});
  EXPECT_TRUE(allClose(runRef("tfm.matmul", {{a}, {bt}}, transposeB(true)), Tensor::f32({2, 2}, {4, 5, 10, 11}), 0, 0));
}

TEST(ReferenceKernels, HeadsRoundTrip) {
  Tensor x = randomF32({2, 3, 8}, 9);
  Tensor split = runRef("tfm.split_heads", {{x}}, {{"heads", AttrValue::ofInt(4)}});
  ASSERT_EQ(split.shape, Shape({2, 4, 3, 2}));
  // y[b, h, s, k] = x[b, s, h*K + k]
  EXPECT_EQ(split.data<float>()[((1 * 4 + 2) * 3 + 1) * 2 + 1], x.data<float>()[(1 * 3 + 1) * 8 + 2 * 2 + 1]);
  EXPECT_TRUE(allClose(runRef("tfm.merge_heads", {{split}}), x, 0, 0));
}

TEST(ReferenceKernels, Masks) {
  Tensor ids = Tensor::i32({2, 3}, {5, 0, 7, 0, 0, 0});
  Tensor keep = runRef("tfm.padding_mask", {{ids}}, {{"pad_id", AttrValue::ofInt(0)}}, DType::Bool);
  EXPECT_TRUE(allClose(keep, Tensor::boolean({2, 3}, {1, 0, 1, 0, 0, 0}), 0, 0));
  Tensor scores = Tensor::f32({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor k = Tensor::boolean({1, 3}, {1, 1, 0});
  EXPECT_TRUE(allClose(runRef("tfm.mask", {{scores}, {k}}, {{"causal", AttrValue::ofInt(1)}}),
                       Tensor::f32({1, 1, 2, 3}, {1, -kInf, -kInf, 4, 5, -kInf}), 0, 0));
  EXPECT_TRUE(allClose(runRef("tfm.mask", {{scores}, {k}}, {{"causal", AttrValue::ofInt(0)}}),
                       Tensor::f32({1, 1, 2, 3}, {1, 2, -kInf, 4, 5, -kInf}), 0, 0));
}

TEST(ReferenceKernels, SoftmaxByHand) {
  Tensor x = Tensor::f32({2, 2}, {0, std::log(3.0f), -kInf, -kInf});
  EXPECT_TRUE(allClose(runRef("tfm.softmax", {{x}}), Tensor::f32({2, 2}, {0.25f, 0.75f, 0, 0}), 1e-7, 1e-6));
}

TEST(ReferenceKernels, LayerNormByHand) {
  Tensor x = Tensor::f32({1, 2}, {3.5f, 0.0f});  // mean 1.75, std 1.75 (eps 1e-12) -> [1, -1]
  Tensor y = runRef("tfm.layer_norm",
                    {{x}, {Tensor::f32({2}, {2, 1}), true}, {Tensor::f32({2}, {0, 0.5f}), true}},
                    {{"epsilon", AttrValue::ofFloat(1e-12)}});
  EXPECT_TRUE(allClose(y, Tensor::f32({1, 2}, {2.0f, -0.5f}), 1e-6, 1e-6));
}

TEST(ReferenceKernels, LabelSmoothedXentByHand) {
  const double e = 0.1;
  // Position 0: p = [0.25, 0.75], target 1. Position 1: pad (ignored). Position 2: uniform, target 0.
  Tensor logits = Tensor::f32({1, 3, 2}, {0, std::log(3.0f), 9, -9, 0, 0});
  Tensor targets = Tensor::i32({1, 3}, {1, 0, 0});
  Attrs attrs{{"smoothing", AttrValue::ofFloat(e)}, {"pad_id", AttrValue::ofInt(0)}};
  // pad_id = 0 makes position 2 a pad too; use pad_id = -1 to keep it.
  attrs["pad_id"] = AttrValue::ofInt(-1);
  Tensor targets2 = Tensor::i32({1, 3}, {1, -1, 0});
  double pos0 = -(1 - e) * std::log(0.75) - (e / 2) * (std::log(0.25) + std::log(0.75));
  double pos2 = std::log(2.0);  // uniform: every term is log 2
  Tensor loss = runRef("tfm.label_smoothed_xent", {{logits}, {targets2}}, attrs);
  ASSERT_EQ(loss.shape, Shape({}));
  EXPECT_NEAR(loss.data<float>()[0], (pos0 + pos2) / 2, 1e-6);
  // Every position padded -> 0.
  attrs["pad_id"] = AttrValue::ofInt(0);
  Tensor allPad = runRef("tfm.label_smoothed_xent", {{logits}, {Tensor::i32({1, 3}, {0, 0, 0})}}, attrs);
  EXPECT_EQ(allPad.data<float>()[0], 0.0f);
  (void)targets;
}

TEST(ReferenceKernels, EmbeddingAndPositions) {
  Tensor table = Tensor::f32({3, 2}, {0, 1, 10, 11, 20, 21});
  Tensor e = runRef("tfm.embedding", {{table, true}, {Tensor::i32({1, 2}, {2, 0})}});
  EXPECT_TRUE(allClose(e, Tensor::f32({1, 2, 2}, {20, 21, 0, 1}), 0, 0));
  Tensor p = runRef("tfm.add_positions", {{e}, {Tensor::f32({3, 2}, {1, 2, 3, 4, 5, 6}), true}});
  EXPECT_TRUE(allClose(p, Tensor::f32({1, 2, 2}, {21, 23, 3, 5}), 0, 0));
}

// bf16 GEMM operands (open dtypes): both backends run the reference kernel (no fast bf16 GEMM
// yet) and give exactly the f32 GEMM of the bf16-rounded values, in f32.
TEST(Bf16, MatmulEqualsF32MatmulOfRoundedOperands) {
  Tensor a = randomF32({5, 7}, 81), b = randomF32({3, 7}, 82);
  std::vector<float> av(a.data<float>(), a.data<float>() + a.numel()), bv(b.data<float>(), b.data<float>() + b.numel());
  std::vector<float> ar(av.size()), br(bv.size());
  for (size_t i = 0; i < av.size(); ++i) ar[i] = bf16ToFloat(floatToBf16(av[i]));
  for (size_t i = 0; i < bv.size(); ++i) br[i] = bf16ToFloat(floatToBf16(bv[i]));
  EXPECT_NE(ar, av);  // rounding happened
  Tensor expected = SingleOp("tfm.matmul", {{Tensor::f32({5, 7}, ar)}, {Tensor::f32({3, 7}, br)}}, transposeB(true))
                        .run(KernelBackend::Reference);
  for (KernelBackend backend : {KernelBackend::Reference, KernelBackend::Dnnl}) {
    std::string kernel;
    Tensor got = SingleOp("tfm.matmul", {{Tensor::bf16({5, 7}, av)}, {Tensor::bf16({3, 7}, bv)}}, transposeB(true))
                     .run(backend, &kernel);
    EXPECT_EQ(kernel, "reference.matmul");
    EXPECT_TRUE(allClose(got, expected, 0, 0));
  }
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(1.00390625f), 0x3f80);  // halfway between 0x3f80 and 0x3f81: ties to even
  EXPECT_EQ(floatToBf16(1.01171875f), 0x3f82);  // halfway between 0x3f81 and 0x3f82: ties to even
}

}  // namespace
}  // namespace tfmrt::test
