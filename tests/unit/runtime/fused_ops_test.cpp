// The fused ops (tfm.linear, tfm.add_layer_norm, tfm.concat, tfm.slice_last) and weight layouts:
// op-table and shape checks, reference kernels by hand, every op on both backends against an
// independent double-precision implementation, linear plain vs packed vs reference, the fast
// elementwise / copy kernels against their reference kernels, evaluation of weight-derived nodes
// when weights are set, and planArtifactMemory against what run() allocates.
#include <cmath>
#include <limits>

#include "kernel_registry.h"
#include "op_schema.h"
#include "shape_inference.h"
#include "test_util.h"

namespace tfmrt::test {
namespace {

const float kInf = std::numeric_limits<float>::infinity();

Attrs str(const std::string &name, const std::string &value) { return {{name, AttrValue::ofString(value)}}; }

// Attributes of a tfm.linear node; defaults are left out, as the compiler leaves them out.
Attrs linearAttrs(const std::string &act, bool packed) {
  Attrs a;
  if (act != "none") a["activation"] = AttrValue::ofString(act);
  if (packed) a["weight_layout"] = AttrValue::ofString("packed");
  return a;
}


// --- independent double-precision implementations (dialects/tfm/README.md) -------------------

double gelu(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }

Tensor linearExpected(const Tensor &x, const Tensor &w, const Tensor &bias, const Tensor *residual,
                      const std::string &act) {
  const int64_t k = x.shape.back(), n = w.shape[0];
  Shape outShape = x.shape;
  outShape.back() = n;
  Tensor y(DType::F32, outShape);
  const int64_t rows = n ? y.numel() / n : 0;  // from the result: K may be 0
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias.data<float>()[j];
      for (int64_t t = 0; t < k; ++t) acc += double(x.data<float>()[i * k + t]) * w.data<float>()[j * k + t];
      if (act == "relu") acc = std::max(acc, 0.0);
      if (act == "gelu") acc = gelu(acc);
      if (residual) acc += residual->data<float>()[i * n + j];
      y.data<float>()[i * n + j] = float(acc);
    }
  return y;
}

Tensor layerNormExpected(const Tensor &a, const Tensor *b, const Tensor &gamma, const Tensor &beta, double eps) {
  Tensor y(DType::F32, a.shape);
  const int64_t n = a.shape.back(), rows = n ? a.numel() / n : 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> v(static_cast<size_t>(n));
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) {
      v[j] = double(a.data<float>()[r * n + j]) + (b ? double(b->data<float>()[r * n + j]) : 0.0);
      mean += v[j];
    }
    mean /= double(n);
    for (int64_t j = 0; j < n; ++j) var += (v[j] - mean) * (v[j] - mean);
    var /= double(n);
    for (int64_t j = 0; j < n; ++j)
      y.data<float>()[r * n + j] =
          float((v[j] - mean) / std::sqrt(var + eps) * gamma.data<float>()[j] + beta.data<float>()[j]);
  }
  return y;
}

// --- op table and shapes -------------------------------------------------------------------

Node node(const std::string &op, Attrs attrs = {}) {
  Node n;
  n.op = op;
  n.attrs = std::move(attrs);
  return n;
}

Status inferStatus(const Node &n, std::vector<Shape> in, Shape *result = nullptr) {
  std::vector<const Shape *> ptrs;
  for (auto &s : in) ptrs.push_back(&s);
  Shape out;
  Status s = inferShape(n, ptrs, out);
  if (result) *result = out;
  return s;
}

Shape infer(const Node &n, std::vector<Shape> in) {
  Shape out;
  Status s = inferStatus(n, std::move(in), &out);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

TEST(FusedShapes, EveryFusedOp) {
  EXPECT_EQ(infer(node("tfm.linear"), {{2, 3, 4}, {5, 4}, {5}}), Shape({2, 3, 5}));
  EXPECT_EQ(infer(node("tfm.linear"), {{2, 3, 4}, {5, 4}, {5}, {2, 3, 5}}), Shape({2, 3, 5}));
  EXPECT_EQ(infer(node("tfm.linear"), {{7}, {5, 7}, {5}}), Shape({5}));
  EXPECT_EQ(infer(node("tfm.linear"), {{kDyn, kDyn, 4}, {5, 4}, {5}, {2, kDyn, kDyn}}), Shape({2, kDyn, 5}));
  EXPECT_EQ(infer(node("tfm.add_layer_norm"), {{2, 5}, {2, 5}, {5}, {5}}), Shape({2, 5}));
  EXPECT_EQ(infer(node("tfm.add_layer_norm"), {{kDyn, 5}, {3, kDyn}, {5}, {5}}), Shape({3, 5}));
  EXPECT_EQ(infer(node("tfm.concat"), {{2, 4}, {3, 4}, {1, 4}}), Shape({6, 4}));
  EXPECT_EQ(infer(node("tfm.concat"), {{2}}), Shape({2}));
  EXPECT_EQ(infer(node("tfm.concat"), {{2, kDyn}, {kDyn, 4}}), Shape({kDyn, 4}));
  Attrs slice{{"offset", AttrValue::ofInt(2)}, {"size", AttrValue::ofInt(3)}};
  EXPECT_EQ(infer(node("tfm.slice_last", slice), {{4, 9}}), Shape({4, 3}));
  EXPECT_EQ(infer(node("tfm.slice_last", slice), {{kDyn, kDyn, 5}}), Shape({kDyn, kDyn, 3}));
  EXPECT_EQ(infer(node("tfm.slice_last", slice), {{2, kDyn}}), Shape({2, 3}));
}

TEST(FusedShapes, Mismatches) {
  EXPECT_ERROR(inferStatus(node("tfm.linear"), {{2, 4}, {5, 3}, {5}}), "weight must be [N, K] for x [..., K]",
               "[2, 4] vs [5, 3]");
  EXPECT_ERROR(inferStatus(node("tfm.linear"), {{2, 4}, {5, 4}, {6}}), "bias must be [N]");
  EXPECT_ERROR(inferStatus(node("tfm.linear"), {{2, 4}, {5, 4}, {5}, {2, 4}}), "residual must have the result's shape",
               "[2, 5] vs [2, 4]");
  EXPECT_ERROR(inferStatus(node("tfm.add_layer_norm"), {{2, 5}, {2, 4}, {5}, {5}}), "same shape");
  EXPECT_ERROR(inferStatus(node("tfm.add_layer_norm"), {{2, 5}, {2, 5}, {4}, {5}}), "gamma must match");
  EXPECT_ERROR(inferStatus(node("tfm.concat"), {{2, 4}, {3, 5}}), "operand #1 [3, 5] differs from operand #0 [2, 4] in dim 1");
  EXPECT_ERROR(inferStatus(node("tfm.concat"), {{2, 4}, {3}}), "equal ranks");
  EXPECT_ERROR(inferStatus(node("tfm.slice_last", {{"offset", AttrValue::ofInt(4)}, {"size", AttrValue::ofInt(3)}}),
                           {{2, 6}}),
               "columns [4, 7) exceed the last dim of [2, 6]");
}

// A node of `op` over fresh inputs of the given shapes (declared as given).
Artifact nodeOver(const std::string &op, const std::vector<Shape> &operands, Shape result, Attrs attrs) {
  Artifact a;
  a.modelName = "one";
  FunctionBuilder f(a, "forward");
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < operands.size(); ++i) ids.push_back(f.input("x" + std::to_string(i), DType::F32, operands[i]));
  f.output(f.op(op, ids, DType::F32, std::move(result), std::move(attrs)));
  f.finish();
  return a;
}

Status loadStatus(const Artifact &a, KernelBackend backend = KernelBackend::Dnnl) {
  std::unique_ptr<Model> m;
  RuntimeOptions o;
  o.backend = backend;
  return Model::fromArtifact(a, o, m);
}

TEST(FusedLoadChecks, OperandCounts) {
  EXPECT_ERROR(loadStatus(nodeOver("tfm.linear", {{2, 4}, {5, 4}}, {2, 5}, {})), "node 0 (tfm.linear at test.yaml:1:3)",
               "expects 3 or 4 operands, got 2");
  EXPECT_ERROR(loadStatus(nodeOver("tfm.linear", {{2, 4}, {5, 4}, {5}, {2, 5}, {2, 5}}, {2, 5}, {})),
               "expects 3 or 4 operands, got 5");
  EXPECT_ERROR(loadStatus(nodeOver("tfm.concat", {}, {2}, {})), "node 0 (tfm.concat", "expects at least 1 operand, got 0");
  EXPECT_ERROR(loadStatus(nodeOver("tfm.add_layer_norm", {{2, 4}, {2, 4}, {4}}, {2, 4}, {})),
               "expects 4 operands, got 3");
  // Operands past the specs take the variadic spec's rules (rank >= 1).
  EXPECT_ERROR(loadStatus(nodeOver("tfm.concat", {{2}, {3}, {}}, {5}, {})), "operand #2 (inputs, value 'x2')",
               "must have rank 1..8");
  EXPECT_TRUE(loadStatus(nodeOver("tfm.concat", {{2}, {3}, {4}}, {9}, {})).ok());
}

TEST(FusedLoadChecks, StringAttributes) {
  const std::vector<Shape> lin{{2, 4}, {5, 4}, {5}};
  EXPECT_ERROR(loadStatus(nodeOver("tfm.linear", lin, {2, 5}, str("activation", "tanh"))),
               "node 0 (tfm.linear at test.yaml:1:3)", "attribute 'activation' must be one of 'none', 'relu', 'gelu', got 'tanh'");
  EXPECT_ERROR(loadStatus(nodeOver("tfm.linear", lin, {2, 5}, str("weight_layout", "blocked"))),
               "attribute 'weight_layout' must be one of 'plain', 'packed', 'packed_bf16', 'packed_int8', got 'blocked'");
  EXPECT_ERROR(loadStatus(nodeOver("tfm.linear", lin, {2, 5}, {{"activation", AttrValue::ofInt(1)}})),
               "attribute 'activation' must be String, got Int");
  EXPECT_ERROR(loadStatus(nodeOver("tfm.matmul", {{2, 4}, {4, 5}}, {2, 5}, str("weight_layout", "tiled"))),
               "node 0 (tfm.matmul", "'weight_layout' must be one of");
  EXPECT_ERROR(loadStatus(nodeOver("tfm.slice_last", {{2, 6}}, {2, 0},
                                   {{"offset", AttrValue::ofInt(1)}, {"size", AttrValue::ofInt(0)}})),
               "attribute 'size' must be in [1, 1099511627776], got 0");
  EXPECT_ERROR(loadStatus(nodeOver("tfm.slice_last", {{2, 6}}, {2, 3}, {{"offset", AttrValue::ofInt(5)},
                                                                       {"size", AttrValue::ofInt(3)}})),
               "node 0 (tfm.slice_last", "columns [5, 8) exceed the last dim of [2, 6]");
  EXPECT_ERROR(loadStatus(nodeOver("tfm.slice_last", {{2, 6}}, {2, 3}, {{"offset", AttrValue::ofInt(1)}})),
               "missing required attribute 'size'");
  // Present-but-default attributes are accepted like absent ones.
  Attrs defaults = str("activation", "none");
  defaults["weight_layout"] = AttrValue::ofString("plain");
  EXPECT_TRUE(loadStatus(nodeOver("tfm.linear", lin, {2, 5}, defaults)).ok());
}

// A packed weight is reordered when weights are set: it must be known by then, on every backend.
TEST(FusedLoadChecks, PackedWeightMustBeKnownBeforeRun) {
  for (KernelBackend backend : {KernelBackend::Reference, KernelBackend::Dnnl}) {
    SCOPED_TRACE(backendName(backend));
    EXPECT_ERROR(loadStatus(nodeOver("tfm.linear", {{2, 4}, {5, 4}, {5}}, {2, 5}, linearAttrs("none", true)), backend),
                 "node 0 (tfm.linear at test.yaml:1:3)", "weight_layout 'packed' needs a weight known before run()",
                 "operand #1 'x1' is an entry input");
    Artifact a;
    FunctionBuilder f(a, "forward");
    uint32_t x = f.input("x", DType::F32, {kDyn, 4});
    uint32_t w = f.param("w", {5, 4});
    uint32_t wr = f.op("tfm.relu", {f.op("tfm.scale", {w}, DType::F32, {5, 4}, {{"factor", AttrValue::ofFloat(2)}})},
                       DType::F32, {5, 4});
    uint32_t computed = f.op("tfm.add", {wr, f.op("tfm.relu", {x}, DType::F32, {kDyn, 4})}, DType::F32, {5, 4});
    f.output(f.op("tfm.matmul", {x, computed}, DType::F32, {kDyn, 5},
                  {{"transpose_b", AttrValue::ofInt(1)}, {"weight_layout", AttrValue::ofString("packed")}}));
    f.finish();
    EXPECT_ERROR(loadStatus(a, backend), "node 4 (tfm.matmul", "operand #1 '%", "is computed per call");
  }
}

TEST(FusedRegistry, BothLayoutsHaveKernelsOnBothBackends) {
  const KernelRegistry &r = KernelRegistry::builtin();
  for (const char *op : {"tfm.matmul", "tfm.linear"})
    for (Layout layout : {Layout::Plain, Layout::Packed})
      for (KernelBackend backend : {KernelBackend::Reference, KernelBackend::Dnnl})
        EXPECT_NE(r.find({op, DType::F32, layout, backend}), nullptr)
            << op << " " << layoutName(layout) << " " << backendName(backend);
  for (const char *op : {"tfm.add_layer_norm", "tfm.concat", "tfm.slice_last"})
    EXPECT_NE(r.find({op, DType::F32, Layout::Plain, KernelBackend::Reference}), nullptr) << op;
  for (const char *op : {"tfm.add_layer_norm", "tfm.slice_last", "tfm.scale", "tfm.relu", "tfm.gelu", "tfm.add",
                         "tfm.bias_add", "tfm.mask", "tfm.split_heads", "tfm.merge_heads"})
    EXPECT_NE(r.find({op, DType::F32, Layout::Plain, KernelBackend::Dnnl}), nullptr) << op;
}

// --- reference kernels by hand ---------------------------------------------------------------

Tensor runRef(const std::string &op, const std::vector<Operand> &args, const Attrs &attrs = {}) {
  return SingleOp(op, args, attrs).run(KernelBackend::Reference);
}

TEST(FusedReference, LinearByHand) {
  // x W^T = [1, -1, 4]; + b -> [1.5, -3, 5]; relu -> [1.5, 0, 5]; + residual [1, 1, 1].
  Tensor x = Tensor::f32({1, 2}, {1, 2});
  Tensor w = Tensor::f32({3, 2}, {1, 0, 1, -1, 0, 2});
  Tensor b = Tensor::f32({3}, {0.5f, -2, 1});
  Tensor r = Tensor::f32({1, 3}, {1, 1, 1});
  EXPECT_TRUE(allClose(runRef("tfm.linear", {{x}, {w, true}, {b, true}}), Tensor::f32({1, 3}, {1.5f, -3, 5}), 0, 0));
  EXPECT_TRUE(allClose(runRef("tfm.linear", {{x}, {w, true}, {b, true}, {r}}, linearAttrs("relu", false)),
                       Tensor::f32({1, 3}, {2.5f, 1, 6}), 0, 0));
  EXPECT_TRUE(allClose(runRef("tfm.linear", {{x}, {w, true}, {b, true}}, linearAttrs("gelu", true)),
                       Tensor::f32({1, 3}, {float(gelu(1.5)), float(gelu(-3)), float(gelu(5))}), 1e-7, 1e-6));
}

TEST(FusedReference, ConcatAndSliceByHand) {
  Tensor a = Tensor::f32({1, 3}, {1, 2, 3}), b = Tensor::f32({2, 3}, {4, 5, 6, 7, 8, 9});
  Tensor c = runRef("tfm.concat", {{a}, {b}, {a}});
  EXPECT_TRUE(allClose(c, Tensor::f32({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3}), 0, 0));
  Tensor s = runRef("tfm.slice_last", {{c}}, {{"offset", AttrValue::ofInt(1)}, {"size", AttrValue::ofInt(2)}});
  EXPECT_TRUE(allClose(s, Tensor::f32({4, 2}, {2, 3, 5, 6, 8, 9, 2, 3}), 0, 0));
}

// The fused oracle is the unfused one, bit for bit.
TEST(FusedReference, AddLayerNormIsLayerNormOfAdd) {
  Tensor a = randomF32({3, 5, 37}, 1, -3, 3), b = randomF32({3, 5, 37}, 2, -3, 3);
  Tensor g = randomF32({37}, 3, 0.5f, 1.5f), be = randomF32({37}, 4);
  Attrs eps{{"epsilon", AttrValue::ofFloat(1e-6)}};
  Tensor fused = runRef("tfm.add_layer_norm", {{a}, {b}, {g, true}, {be, true}}, eps);
  Tensor sum = runRef("tfm.add", {{a}, {b}});
  EXPECT_TRUE(allClose(fused, runRef("tfm.layer_norm", {{sum}, {g, true}, {be, true}}, eps), 0, 0));
  EXPECT_TRUE(allClose(fused, layerNormExpected(a, &b, g, be, 1e-6), 2e-6, 1e-5));
}

// --- every fused op on both backends against the double-precision implementations ------------

class FusedOps : public ::testing::TestWithParam<KernelBackend> {};

TEST_P(FusedOps, LinearAddLayerNormConcatSlice) {
  const KernelBackend backend = GetParam();
  Tensor x = randomF32({2, 3, 24}, 10), w = randomF32({17, 24}, 11), b = randomF32({17}, 12);
  Tensor r = randomF32({2, 3, 17}, 13);
  for (bool packed : {false, true})
    for (const char *act : {"none", "relu", "gelu"}) {
      SCOPED_TRACE(std::string(act) + (packed ? " packed" : " plain"));
      Tensor got = SingleOp("tfm.linear", {{x}, {w, true}, {b, true}, {r}}, linearAttrs(act, packed)).run(backend);
      EXPECT_TRUE(allClose(got, linearExpected(x, w, b, &r, act), 2e-5, 1e-5));
    }
  Tensor a = randomF32({4, 33}, 14, -2, 6), z = randomF32({4, 33}, 15), g = randomF32({33}, 16, 0.5f, 1.5f);
  Tensor be = randomF32({33}, 17);
  Tensor aln = SingleOp("tfm.add_layer_norm", {{a}, {z}, {g, true}, {be, true}}, {{"epsilon", AttrValue::ofFloat(1e-5)}}).run(backend);
  EXPECT_TRUE(allClose(aln, layerNormExpected(a, &z, g, be, 1e-5), 2e-5, 1e-5));
  // Run-time concat (caller inputs) and the slice of its result.
  Tensor c0 = randomF32({2, 5}, 18), c1 = randomF32({3, 5}, 19);
  Tensor c = SingleOp("tfm.concat", {{c0}, {c1}}, {}).run(backend);
  ASSERT_EQ(c.shape, Shape({5, 5}));
  for (int64_t i = 0; i < 25; ++i)
    EXPECT_EQ(c.data<float>()[i], i < 10 ? c0.data<float>()[i] : c1.data<float>()[i - 10]) << i;
  Tensor s = SingleOp("tfm.slice_last", {{c}}, {{"offset", AttrValue::ofInt(3)}, {"size", AttrValue::ofInt(2)}}).run(backend);
  ASSERT_EQ(s.shape, Shape({5, 2}));
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 2; ++j) EXPECT_EQ(s.data<float>()[i * 2 + j], c.data<float>()[i * 5 + 3 + j]);
}

INSTANTIATE_TEST_SUITE_P(Backends, FusedOps, ::testing::Values(KernelBackend::Reference, KernelBackend::Dnnl),
                         [](const auto &info) { return std::string(backendName(info.param)); });

// --- linear: plain vs packed vs reference ------------------------------------------------------

struct LinearCase {
  Shape x;  // [..., K]
  int64_t n;
  std::string act;
  bool residual;
};

void PrintTo(const LinearCase &c, std::ostream *os) {
  *os << "x " << ::testing::PrintToString(c.x) << ", N " << c.n << ", " << c.act << (c.residual ? ", residual" : "");
}

class LinearLayouts : public ::testing::TestWithParam<LinearCase> {};

TEST_P(LinearLayouts, PlainPackedAndReferenceAgree) {
  const LinearCase &c = GetParam();
  const int64_t k = c.x.back();
  Tensor x = randomF32(c.x, 21), w = randomF32({c.n, k}, 22), b = randomF32({c.n}, 23);
  Shape outShape = c.x;
  outShape.back() = c.n;
  Tensor r = randomF32(outShape, 24);
  std::vector<Operand> args{{x}, {w, true}, {b, true}};
  if (c.residual) args.push_back({r});
  const Tensor expected = linearExpected(x, w, b, c.residual ? &r : nullptr, c.act);
  const double atol = 1e-5 * double(k) + 1e-5;
  std::string name;
  Tensor ref = SingleOp("tfm.linear", args, linearAttrs(c.act, false)).run(KernelBackend::Reference, &name);
  EXPECT_EQ(name, "reference.linear");
  EXPECT_TRUE(allClose(ref, expected, 1e-6, 1e-6));
  for (bool packed : {false, true}) {
    SCOPED_TRACE(packed ? "packed" : "plain");
    Tensor fast = SingleOp("tfm.linear", args, linearAttrs(c.act, packed)).run(KernelBackend::Dnnl, &name);
    EXPECT_EQ(name, packed ? "dnnl.linear.packed" : "dnnl.linear.plain");
    EXPECT_TRUE(allClose(fast, expected, atol, 1e-4));
    EXPECT_TRUE(allClose(fast, ref, atol, 1e-4));
  }
}

std::vector<LinearCase> linearCases() {
  std::vector<LinearCase> cases;
  for (const char *act : {"none", "relu", "gelu"})
    for (bool residual : {false, true})
      for (auto [x, n] : std::vector<std::pair<Shape, int64_t>>{{{1, 1}, 1},
                                                                 {{1, 7}, 5},
                                                                 {{1, 64}, 33},
                                                                 {{3, 17}, 13},
                                                                 {{37, 64}, 129},
                                                                 {{2, 5, 31}, 17},
                                                                 {{4, 9, 96}, 256},
                                                                 {{0, 8}, 4},
                                                                 {{5, 0}, 3}})
        cases.push_back({x, n, act, residual});
  return cases;
}

std::string linearName(const ::testing::TestParamInfo<LinearCase> &info) {
  std::string s;
  for (int64_t d : info.param.x) s += std::to_string(d) + "x";
  return s + "N" + std::to_string(info.param.n) + "_" + info.param.act + (info.param.residual ? "_residual" : "");
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearLayouts, ::testing::ValuesIn(linearCases()), linearName);

// A weight fed by the caller (not a parameter) runs on the plain kernel, any K and N.
TEST(LinearState, WeightFromTheCaller) {
  Tensor x = randomF32({6, 19}, 31), w = randomF32({11, 19}, 32), b = randomF32({11}, 33), r = randomF32({6, 11}, 34);
  SingleOp op("tfm.linear", {{x}, {w}, {b}, {r}}, linearAttrs("gelu", false));
  op.compare("dnnl.linear.plain", 1e-4, 1e-4);
  EXPECT_TRUE(allClose(op.run(KernelBackend::Dnnl), linearExpected(x, w, b, &r, "gelu"), 1e-4, 1e-4));
}

// One model: M changes across calls, weights are replaced, and an arena slot dirtied by an
// earlier node is reused by a K = 0 linear, whose result must still be act(bias) + residual.
TEST(LinearState, RuntimeMWeightUpdatesAndEmptyContraction) {
  Artifact art;
  FunctionBuilder f(art, "forward");
  uint32_t x = f.input("x", DType::F32, {kDyn, 24});
  uint32_t e = f.input("e", DType::F32, {kDyn, 0});
  uint32_t w = f.param("w", {40, 24}), b = f.param("b", {40}), we = f.param("we", {40, 0});
  uint32_t h = f.op("tfm.linear", {x, w, b}, DType::F32, {kDyn, 40}, linearAttrs("relu", true));
  uint32_t h2 = f.op("tfm.linear", {h, f.param("w2", {40, 40}), b, h}, DType::F32, {kDyn, 40}, linearAttrs("none", true));
  // Reuses the slot of h once h2 is done (same size): starts from garbage.
  uint32_t empty = f.op("tfm.linear", {e, we, b, h2}, DType::F32, {kDyn, 40}, linearAttrs("gelu", true));
  f.output(empty);
  f.finish();
  auto fast = loadModel(art, KernelBackend::Dnnl);
  auto ref = loadModel(art, KernelBackend::Reference);
  ASSERT_TRUE(fast && ref);
  EXPECT_EQ(fast->kernelName("forward", 0), "dnnl.linear.packed");
  for (int version = 0; version < 2; ++version) {
    std::map<std::string, Tensor> weights{{"w", randomF32({40, 24}, 100 + version)},
                                          {"w2", randomF32({40, 40}, 200 + version)},
                                          {"b", randomF32({40}, 300 + version)},
                                          {"we", Tensor::f32({40, 0})}};
    ASSERT_OK(fast->setWeights(weights));
    ASSERT_OK(ref->setWeights(weights));
    for (int64_t m : {1, 7, 64, 1, 7}) {
      std::vector<Tensor> in{randomF32({m, 24}, uint64_t(m)), Tensor::f32({m, 0})}, got, want;
      ASSERT_OK(fast->run("forward", in, got));
      ASSERT_OK(ref->run("forward", in, want));
      EXPECT_TRUE(allClose(got[0], want[0], 1e-4, 1e-4)) << "version " << version << " M " << m;
      Tensor h1 = linearExpected(in[0], weights["w"], weights["b"], nullptr, "relu");
      Tensor hh = linearExpected(h1, weights["w2"], weights["b"], &h1, "none");
      EXPECT_TRUE(allClose(got[0], linearExpected(in[1], weights["we"], weights["b"], &hh, "gelu"), 1e-4, 1e-4));
    }
  }
}

// --- fast kernels against their reference kernels ----------------------------------------------

// Sizes straddle kParallelMinElements (32768) so both the serial and the parallel paths run.
const std::vector<Shape> kElementwiseShapes{{1}, {7, 3}, {3, 5, 17}, {301, 129}, {2, 70001}, {0, 4}};

class FastElementwise : public ::testing::TestWithParam<Shape> {};

TEST_P(FastElementwise, MatchesReference) {
  const Shape &shape = GetParam();
  Tensor x = randomF32(shape, 41, -8, 8), y = randomF32(shape, 42, -8, 8);
  if (x.numel() > 3) x.data<float>()[0] = 0.0f, x.data<float>()[1] = -20.0f, x.data<float>()[2] = 20.0f;
  SingleOp("tfm.scale", {{x}}, {{"factor", AttrValue::ofFloat(-0.37)}}).compare("fast.scale", 0, 0);
  SingleOp("tfm.relu", {{x}}, {}).compare("fast.relu", 0, 0);
  SingleOp("tfm.gelu", {{x}}, {}).compare("fast.gelu", 1e-6, 2e-6);
  SingleOp("tfm.add", {{x}, {y}}, {}).compare("fast.add", 0, 0);
  const int64_t n = shape.back();
  SingleOp("tfm.bias_add", {{x}, {randomF32({n}, 43), true}}, {}).compare("fast.bias_add", 0, 0);
  if (n > 2)
    SingleOp("tfm.slice_last", {{x}}, {{"offset", AttrValue::ofInt(1)}, {"size", AttrValue::ofInt(n - 2)}})
        .compare("fast.slice_last", 0, 0);
  if (n > 0) {
    Attrs eps{{"epsilon", AttrValue::ofFloat(1e-5)}};
    SingleOp("tfm.add_layer_norm", {{x}, {y}, {randomF32({n}, 44, 0.5f, 1.5f), true}, {randomF32({n}, 45), true}}, eps)
        .compare("fast.add_layer_norm", 3e-5, 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FastElementwise, ::testing::ValuesIn(kElementwiseShapes));

// GELU against the exact formula over a dense sweep, including the far tails.
TEST(FastElementwiseGelu, DenseSweep) {
  const int64_t count = 40001;
  Tensor x(DType::F32, {count});
  for (int64_t i = 0; i < count; ++i) x.data<float>()[i] = -20.0f + 40.0f * float(i) / float(count - 1);
  Tensor y = SingleOp("tfm.gelu", {{x}}, {}).run(KernelBackend::Dnnl);
  double worst = 0;
  for (int64_t i = 0; i < count; ++i) worst = std::max(worst, std::fabs(y.data<float>()[i] - gelu(x.data<float>()[i])) /
                                                               (1e-6 + 1e-6 * std::fabs(gelu(x.data<float>()[i]))));
  EXPECT_LE(worst, 1.0) << "fast.gelu exceeds |err| <= 1e-6 + 1e-6 |gelu(x)|";
}

class FastHeadsAndMask : public ::testing::TestWithParam<Shape> {};  // [B, H, S, K]

TEST_P(FastHeadsAndMask, MatchesReference) {
  const Shape &s = GetParam();
  const int64_t B = s[0], H = s[1], S = s[2], K = s[3];
  Tensor x = randomF32({B, S, H * K}, 51);
  SingleOp("tfm.split_heads", {{x}}, {{"heads", AttrValue::ofInt(H)}}).compare("fast.split_heads", 0, 0);
  SingleOp("tfm.merge_heads", {{randomF32(s, 52)}}, {}).compare("fast.merge_heads", 0, 0);
  Tensor scores = randomF32({B, H, S, S + 1}, 53);
  Tensor keep = randomIds({B, S + 1}, 0, 2, 54);
  Tensor keepBool(DType::Bool, keep.shape);
  for (int64_t i = 0; i < keep.numel(); ++i) keepBool.data<uint8_t>()[i] = uint8_t(keep.data<int32_t>()[i]);
  for (int causal : {0, 1})
    SingleOp("tfm.mask", {{scores}, {keepBool}}, {{"causal", AttrValue::ofInt(causal)}}).compare("fast.mask", 0, 0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FastHeadsAndMask,
                         ::testing::Values(Shape{1, 1, 1, 1}, Shape{2, 4, 9, 8}, Shape{3, 2, 1, 16}, Shape{4, 8, 33, 64},
                                           Shape{0, 2, 3, 4}));

// --- values derived from weights are evaluated when weights are set ---------------------------

// A merged QKV projection as the compiler emits it: the weights are concatenated (known before
// run(), so evaluated when weights are set), one packed linear, the K block sliced out. A second
// chain slices the merged weight itself (transitively weight-derived) to feed another packed
// linear.
struct MergedQkv {
  static constexpr int64_t D = 8;
  Artifact artifact;
  MergedQkv() {
    artifact.modelName = "qkv";
    FunctionBuilder f(artifact, "forward");
    uint32_t x = f.input("x", DType::F32, {kDyn, kDyn, D});
    uint32_t wq = f.param("q.weight", {D, D}), wk = f.param("k.weight", {D, D}), wv = f.param("v.weight", {D, D});
    const ParamInit normal = ParamInit::Normal;  // non-zero biases, so a stale one would show
    uint32_t bq = f.param("q.bias", {D}, normal), bk = f.param("k.bias", {D}, normal), bv = f.param("v.bias", {D}, normal);
    uint32_t w = f.op("tfm.concat", {wq, wk, wv}, DType::F32, {3 * D, D});
    uint32_t b = f.op("tfm.concat", {bq, bk, bv}, DType::F32, {3 * D});
    uint32_t qkv = f.op("tfm.linear", {x, w, b}, DType::F32, {kDyn, kDyn, 3 * D}, linearAttrs("none", true));
    f.output(f.op("tfm.slice_last", {qkv}, DType::F32, {kDyn, kDyn, D},
                  {{"offset", AttrValue::ofInt(D)}, {"size", AttrValue::ofInt(D)}}));
    uint32_t wFirst = f.op("tfm.slice_last", {w}, DType::F32, {3 * D, D / 2},
                           {{"offset", AttrValue::ofInt(0)}, {"size", AttrValue::ofInt(D / 2)}});
    uint32_t x2 = f.op("tfm.slice_last", {x}, DType::F32, {kDyn, kDyn, D / 2},
                       {{"offset", AttrValue::ofInt(0)}, {"size", AttrValue::ofInt(D / 2)}});
    f.output(f.op("tfm.linear", {x2, wFirst, b}, DType::F32, {kDyn, kDyn, 3 * D}, linearAttrs("relu", true)));
    f.finish();
  }
  // Expected outputs from the individual weights, by the op semantics.
  static std::vector<Tensor> expected(const Model &m, const Tensor &x) {
    Tensor wk = *m.weight("k.weight"), bk = *m.weight("k.bias");
    Tensor w(DType::F32, {3 * D, D / 2}), b(DType::F32, {3 * D});
    const char *names[] = {"q", "k", "v"};
    for (int p = 0; p < 3; ++p)
      for (int64_t i = 0; i < D; ++i) {
        b.data<float>()[p * D + i] = m.weight(std::string(names[p]) + ".bias")->data<float>()[i];
        for (int64_t j = 0; j < D / 2; ++j)
          w.data<float>()[(p * D + i) * (D / 2) + j] = m.weight(std::string(names[p]) + ".weight")->data<float>()[i * D + j];
      }
    Tensor x2(DType::F32, {x.shape[0], x.shape[1], D / 2});
    for (int64_t r = 0; r < x.shape[0] * x.shape[1]; ++r)
      for (int64_t j = 0; j < D / 2; ++j) x2.data<float>()[r * (D / 2) + j] = x.data<float>()[r * D + j];
    return {linearExpected(x, wk, bk, nullptr, "none"), linearExpected(x2, w, b, nullptr, "relu")};
  }
};

class WeightDerived : public ::testing::TestWithParam<KernelBackend> {};

TEST_P(WeightDerived, EvaluatedOncePerWeightsChange) {
  MergedQkv qkv;
  RuntimeOptions options;
  options.backend = GetParam();
  options.profile = true;
  std::unique_ptr<Model> m;
  ASSERT_OK(Model::fromArtifact(qkv.artifact, options, m));
  const std::string concat = "reference.concat";  // concat has no fast kernel: it runs when weights are set
  auto calls = [&](const std::string &kernel) {
    for (const KernelProfile &p : m->profile())
      if (p.kernel == kernel) return p.calls;
    return int64_t(0);
  };
  ASSERT_OK(m->initWeights(1));
  EXPECT_EQ(calls(concat + " (weights)"), 0) << "an entry not yet run derived its values (it may never run)";
  Tensor x = randomF32({2, 3, MergedQkv::D}, 61);
  std::vector<Tensor> out;
  ASSERT_OK(m->run("forward", {x}, out));
  EXPECT_EQ(calls(concat + " (weights)"), 2);  // two concat nodes, once each, at the first run
  for (int i = 0; i < 2; ++i) ASSERT_OK(m->run("forward", {x}, out));
  EXPECT_EQ(calls(concat + " (weights)"), 2);
  EXPECT_EQ(calls(concat), 0) << "a weight-derived node ran per call";
  auto want = MergedQkv::expected(*m, x);
  EXPECT_TRUE(allClose(out[0], want[0], 1e-5, 1e-5));
  EXPECT_TRUE(allClose(out[1], want[1], 1e-5, 1e-5));

  // New weights: the derived values (and packed copies of them) follow.
  ASSERT_OK(m->initWeights(2));
  EXPECT_EQ(calls(concat + " (weights)"), 4);
  std::vector<Tensor> again;
  ASSERT_OK(m->run("forward", {x}, again));
  EXPECT_FALSE(allClose(again[0], out[0], 1e-3, 0));
  want = MergedQkv::expected(*m, x);
  EXPECT_TRUE(allClose(again[0], want[0], 1e-5, 1e-5));
  EXPECT_TRUE(allClose(again[1], want[1], 1e-5, 1e-5));
  std::map<std::string, Tensor> weights;
  for (const ParamInfo &p : qkv.artifact.params) weights[p.name] = randomF32(p.shape, 70 + weights.size());
  ASSERT_OK(m->setWeights(weights));
  ASSERT_OK(m->run("forward", {x}, again));
  want = MergedQkv::expected(*m, x);
  EXPECT_TRUE(allClose(again[0], want[0], 1e-5, 1e-5));
  EXPECT_TRUE(allClose(again[1], want[1], 1e-5, 1e-5));
  if (GetParam() == KernelBackend::Dnnl) {
    EXPECT_EQ(m->kernelName("forward", 2), "dnnl.linear.packed");
    EXPECT_EQ(m->kernelName("forward", 6), "dnnl.linear.packed");
  }

  // Only the run-time values live in the arena: linear, slice, slice of x, linear.
  const MemoryPlanSummary plan = m->lastMemoryPlan("forward");
  EXPECT_EQ(plan.num_buffers, 4);
  MemoryPlanSummary planned;
  ASSERT_OK(planArtifactMemory(qkv.artifact, "forward", {{2, 3, MergedQkv::D}}, planned));
  EXPECT_EQ(planned.arena_bytes, plan.arena_bytes);
  EXPECT_EQ(planned.total_intermediate_bytes, plan.total_intermediate_bytes);
  EXPECT_EQ(planned.num_buffers, plan.num_buffers);

  // Model::prepare: an entry named before the weights derives when they are set, one named after
  // at once; neither runs again at the first call.
  std::unique_ptr<Model> early, late;
  ASSERT_OK(Model::fromArtifact(qkv.artifact, options, early));
  ASSERT_OK(Model::fromArtifact(qkv.artifact, options, late));
  auto callsOf = [](const Model &model, const std::string &kernel) {
    for (const KernelProfile &p : model.profile())
      if (p.kernel == kernel) return p.calls;
    return int64_t(0);
  };
  ASSERT_OK(early->prepare({"forward"}));
  EXPECT_EQ(callsOf(*early, concat + " (weights)"), 0);  // no weights yet
  ASSERT_OK(early->initWeights(1));
  ASSERT_OK(late->initWeights(1));
  EXPECT_EQ(callsOf(*early, concat + " (weights)"), 2);
  EXPECT_EQ(callsOf(*late, concat + " (weights)"), 0);
  ASSERT_OK(late->prepare({"forward"}));
  ASSERT_OK(late->prepare({"forward"}));  // already derived: nothing to do
  EXPECT_EQ(callsOf(*late, concat + " (weights)"), 2);
  for (Model *model : {early.get(), late.get()}) {
    ASSERT_OK(model->run("forward", {x}, again));
    EXPECT_EQ(callsOf(*model, concat + " (weights)"), 2);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, WeightDerived, ::testing::Values(KernelBackend::Reference, KernelBackend::Dnnl),
                         [](const auto &info) { return std::string(backendName(info.param)); });

// No parameters: constant-only nodes are evaluated at load.
TEST(WeightDerivedConstants, EvaluatedAtLoadWithoutParameters) {
  Artifact a;
  FunctionBuilder f(a, "forward");
  uint32_t x = f.input("x", DType::F32, {kDyn, 2});
  uint32_t c = f.op("tfm.concat", {f.constant("c0", Tensor::f32({1, 2}, {1, 2})), f.constant("c1", Tensor::f32({1, 2}, {3, 4}))},
                    DType::F32, {2, 2});
  f.output(f.op("tfm.add", {x, c}, DType::F32, {kDyn, 2}));
  f.finish();
  for (KernelBackend backend : {KernelBackend::Reference, KernelBackend::Dnnl}) {
    auto m = loadModel(a, backend);
    ASSERT_TRUE(m);
    EXPECT_FALSE(m->hasWeights());
    std::vector<Tensor> out;
    ASSERT_OK(m->run("forward", {Tensor::f32({2, 2}, {10, 20, 30, 40})}, out));
    EXPECT_TRUE(allClose(out[0], Tensor::f32({2, 2}, {11, 22, 33, 44}), 0, 0));
  }
}

// A failing weight-derived node names itself; an entry in use leaves the model without weights.
TEST(WeightDerivedErrors, FailureNamesTheNodeAndKeepsThePreviousState) {
  Artifact a;
  FunctionBuilder f(a, "forward");
  uint32_t x = f.input("x", DType::F32, {kDyn, 2, 3});
  uint32_t table = f.param("table", {4, 3});
  uint32_t rows = f.op("tfm.embedding", {table, f.constant("ids", Tensor::i32({1, 2}, {1, 7}))}, DType::F32, {1, 2, 3});
  f.output(f.op("tfm.add", {x, rows}, DType::F32, {kDyn, 2, 3}));
  f.finish();
  auto m = loadModel(a, KernelBackend::Dnnl);
  ASSERT_TRUE(m);
  EXPECT_ERROR(m->prepare({"forward", "backward"}), "no entry 'backward'");
  ASSERT_OK(m->prepare({"forward"}));  // in use: derived when the weights are set
  EXPECT_ERROR(m->initWeights(1), "entry 'forward': node 0 (tfm.embedding at test.yaml:1:3)", "evaluated when weights are set",
               "token id 7");
  EXPECT_FALSE(m->hasWeights());
  std::vector<Tensor> out;
  EXPECT_ERROR(m->run("forward", {Tensor::f32({2, 3})}, out), "weights are not set");

  // Not in use: the weights are taken, and the entry's first run reports the node.
  auto lazy = loadModel(a, KernelBackend::Dnnl);
  ASSERT_TRUE(lazy);
  ASSERT_OK(lazy->initWeights(1));
  EXPECT_ERROR(lazy->run("forward", {Tensor::f32({2, 3})}, out), "node 0 (tfm.embedding at test.yaml:1:3)",
               "evaluated when weights are set", "token id 7");
  EXPECT_ERROR(lazy->prepare({"forward"}), "token id 7");
}

// --- planArtifactMemory ---------------------------------------------------------------------

Artifact reluChain(int length) {
  Artifact a;
  a.modelName = "chain";
  FunctionBuilder f(a, "forward");
  uint32_t v = f.input("x", DType::F32, {kDyn, 1000});
  for (int i = 0; i < length; ++i) v = f.op("tfm.relu", {v}, DType::F32, {kDyn, 1000});
  f.output(v);
  f.finish();
  return a;
}

TEST(PlanArtifactMemory, ReusesBuffersAndMatchesRun) {
  Artifact a = reluChain(6);
  MemoryPlanSummary s;
  ASSERT_OK(planArtifactMemory(a, "forward", {{3, 1000}}, s));
  const int64_t buffer = (3 * 1000 * 4 + 63) / 64 * 64;  // 64-byte aligned slots
  EXPECT_EQ(s.num_buffers, 6);
  EXPECT_EQ(s.total_intermediate_bytes, 6 * buffer);
  EXPECT_LT(s.arena_bytes, s.total_intermediate_bytes);
  EXPECT_EQ(s.arena_bytes, 2 * buffer);  // a chain ping-pongs between two buffers
  for (KernelBackend backend : {KernelBackend::Reference, KernelBackend::Dnnl}) {
    auto m = loadModel(a, backend);
    EXPECT_EQ(m->lastMemoryPlan("forward").arena_bytes, 0);
    std::vector<Tensor> out;
    ASSERT_OK(m->run("forward", {randomF32({3, 1000}, 1)}, out));
    const MemoryPlanSummary r = m->lastMemoryPlan("forward");
    EXPECT_EQ(r.arena_bytes, s.arena_bytes);
    EXPECT_EQ(r.total_intermediate_bytes, s.total_intermediate_bytes);
    EXPECT_EQ(r.num_buffers, s.num_buffers);
    EXPECT_EQ(m->lastMemoryPlan("nope").arena_bytes, 0);
  }
}

TEST(PlanArtifactMemory, Errors) {
  Artifact a = reluChain(2);
  MemoryPlanSummary s;
  EXPECT_ERROR(planArtifactMemory(a, "decode", {{1, 1000}}, s), "no entry function 'decode' in model 'chain'",
               "it has 'forward'");
  EXPECT_ERROR(planArtifactMemory(a, "forward", {}, s), "entry 'forward' expects 1 inputs (x), got 0");
  EXPECT_ERROR(planArtifactMemory(a, "forward", {{1000}}, s), "entry 'forward': input 'x' (#0) must have rank 2");
  EXPECT_ERROR(planArtifactMemory(a, "forward", {{2, 999}}, s), "input 'x' (#0) dim 1 must be 1000");
  EXPECT_ERROR(planArtifactMemory(a, "forward", {{-2, 1000}}, s), "has a negative dim");
  Artifact bad = a;
  bad.functions[0].nodes[1].op = "tfm.nonsense";
  EXPECT_ERROR(planArtifactMemory(bad, "forward", {{1, 1000}}, s), "entry 'forward': node 1 (tfm.nonsense at test.yaml:2:3)",
               "unknown op");
  Artifact mismatch = nodeOver("tfm.add", {{kDyn, 4}, {kDyn, 4}}, {kDyn, 4}, {});
  EXPECT_ERROR(planArtifactMemory(mismatch, "forward", {{2, 4}, {3, 4}}, s), "entry 'forward': node 0 (tfm.add",
               "operands must have the same shape");
}

}  // namespace
}  // namespace tfmrt::test
