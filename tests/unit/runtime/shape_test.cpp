// Shape functions, op-table checks at load, and the buffer planner.
#include "memory_planner.h"
#include "op_schema.h"
#include "shape_inference.h"
#include "kernel_registry.h"
#include "test_util.h"

namespace tfmrt::test {
namespace {

Node node(const std::string &op, Attrs attrs = {}) {
  Node n;
  n.op = op;
  n.attrs = std::move(attrs);
  return n;
}

Shape infer(const Node &n, std::vector<Shape> in) {
  std::vector<const Shape *> ptrs;
  for (auto &s : in) ptrs.push_back(&s);
  Shape out;
  Status s = inferShape(n, ptrs, out);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

Status inferStatus(const Node &n, std::vector<Shape> in) {
  std::vector<const Shape *> ptrs;
  for (auto &s : in) ptrs.push_back(&s);
  Shape out;
  return inferShape(n, ptrs, out);
}

TEST(ShapeInference, EveryOp) {
  auto tb = [](int v) { return Attrs{{"transpose_b", AttrValue::ofInt(v)}}; };
  EXPECT_EQ(infer(node("tfm.embedding"), {{10, 4}, {2, 3}}), Shape({2, 3, 4}));
  EXPECT_EQ(infer(node("tfm.add_positions"), {{2, 3, 4}, {8, 4}}), Shape({2, 3, 4}));
  EXPECT_EQ(infer(node("tfm.matmul", tb(1)), {{2, 3, 4}, {5, 4}}), Shape({2, 3, 5}));
  EXPECT_EQ(infer(node("tfm.matmul", tb(0)), {{3, 4}, {4, 5}}), Shape({3, 5}));
  EXPECT_EQ(infer(node("tfm.bias_add"), {{2, 3, 5}, {5}}), Shape({2, 3, 5}));
  EXPECT_EQ(infer(node("tfm.layer_norm"), {{2, 5}, {5}, {5}}), Shape({2, 5}));
  EXPECT_EQ(infer(node("tfm.split_heads", {{"heads", AttrValue::ofInt(4)}}), {{2, 3, 8}}), Shape({2, 4, 3, 2}));
  EXPECT_EQ(infer(node("tfm.merge_heads"), {{2, 4, 3, 2}}), Shape({2, 3, 8}));
  EXPECT_EQ(infer(node("tfm.batch_matmul", tb(1)), {{2, 4, 3, 2}, {2, 4, 7, 2}}), Shape({2, 4, 3, 7}));
  EXPECT_EQ(infer(node("tfm.batch_matmul", tb(0)), {{2, 4, 3, 7}, {2, 4, 7, 2}}), Shape({2, 4, 3, 2}));
  EXPECT_EQ(infer(node("tfm.padding_mask"), {{2, 3}}), Shape({2, 3}));
  EXPECT_EQ(infer(node("tfm.mask"), {{2, 4, 3, 7}, {2, 7}}), Shape({2, 4, 3, 7}));
  EXPECT_EQ(infer(node("tfm.label_smoothed_xent"), {{2, 3, 9}, {2, 3}}), Shape({}));
  for (const char *op : {"tfm.scale", "tfm.relu", "tfm.gelu", "tfm.softmax", "tfm.dropout"})
    EXPECT_EQ(infer(node(op), {{2, 3}}), Shape({2, 3})) << op;
  EXPECT_EQ(infer(node("tfm.add"), {{2, 3}, {2, 3}}), Shape({2, 3}));
}

TEST(ShapeInference, GradientOps) {
  auto rows = [](int v) { return Attrs{{"num_rows", AttrValue::ofInt(v)}}; };
  EXPECT_EQ(infer(node("tfm.weight_grad"), {{2, 3, 5}, {2, 3, 4}}), Shape({5, 4}));
  EXPECT_EQ(infer(node("tfm.bias_grad"), {{2, 3, 5}}), Shape({5}));
  for (const char *op : {"tfm.relu_grad", "tfm.gelu_grad", "tfm.softmax_grad"})
    EXPECT_EQ(infer(node(op), {{2, 3}, {2, 3}}), Shape({2, 3})) << op;
  EXPECT_EQ(infer(node("tfm.layer_norm_grad"), {{2, 5}, {5}, {2, 5}}), Shape({2, 5}));
  EXPECT_EQ(infer(node("tfm.layer_norm_gamma_grad"), {{2, 3, 5}, {2, 3, 5}}), Shape({5}));
  EXPECT_EQ(infer(node("tfm.embedding_grad", rows(10)), {{2, 3}, {2, 3, 4}}), Shape({10, 4}));
  EXPECT_EQ(infer(node("tfm.positions_grad", rows(8)), {{2, 3, 4}}), Shape({8, 4}));
  EXPECT_EQ(infer(node("tfm.label_smoothed_xent_grad"), {{2, 3, 9}, {2, 3}}), Shape({2, 3, 9}));
  EXPECT_EQ(infer(node("tfm.last_position"), {{2, 7, 5}}), Shape({2, 1, 5}));
  auto ta = Attrs{{"transpose_a", AttrValue::ofInt(1)}};
  EXPECT_EQ(infer(node("tfm.batch_matmul", ta), {{2, 4, 7, 3}, {2, 4, 7, 2}}), Shape({2, 4, 3, 2}));

  EXPECT_ERROR(inferStatus(node("tfm.weight_grad"), {{2, 3, 5}, {2, 4, 4}}), "same leading dims");
  EXPECT_ERROR(inferStatus(node("tfm.positions_grad", rows(2)), {{1, 3, 4}}), "sequence length 3 exceeds the 2 rows");
  EXPECT_ERROR(inferStatus(node("tfm.embedding_grad", rows(10)), {{2, 3}, {2, 4, 4}}), "dy must be [B, S, D]");
  EXPECT_ERROR(inferStatus(node("tfm.layer_norm_grad"), {{2, 5}, {4}, {2, 5}}), "gamma must match");
  EXPECT_ERROR(inferStatus(node("tfm.batch_matmul", ta), {{2, 4, 7, 3}, {2, 4, 6, 2}}), "contraction dims differ");
}

TEST(ShapeInference, DynamicDimsPropagate) {
  EXPECT_EQ(infer(node("tfm.matmul", {{"transpose_b", AttrValue::ofInt(1)}}), {{kDyn, kDyn, 4}, {5, 4}}),
            Shape({kDyn, kDyn, 5}));
  EXPECT_EQ(infer(node("tfm.split_heads", {{"heads", AttrValue::ofInt(2)}}), {{kDyn, kDyn, 8}}),
            Shape({kDyn, 2, kDyn, 4}));
  EXPECT_EQ(infer(node("tfm.add"), {{kDyn, 3}, {2, kDyn}}), Shape({2, 3}));
}

TEST(ShapeInference, Mismatches) {
  EXPECT_ERROR(inferStatus(node("tfm.matmul"), {{2, 4}, {5, 6}}), "contraction dims differ", "[2, 4] vs [5, 6]");
  EXPECT_ERROR(inferStatus(node("tfm.add"), {{2, 3}, {3, 2}}), "same shape");
  EXPECT_ERROR(inferStatus(node("tfm.add_positions"), {{1, 9, 4}, {8, 4}}), "sequence length 9 exceeds the 8 rows");
  EXPECT_ERROR(inferStatus(node("tfm.split_heads", {{"heads", AttrValue::ofInt(3)}}), {{1, 2, 8}}),
               "not divisible by heads = 3");
  EXPECT_ERROR(inferStatus(node("tfm.mask"), {{2, 1, 3, 5}, {2, 4}}), "key_keep must be [B, Kv]");
  EXPECT_ERROR(inferStatus(node("tfm.batch_matmul"), {{2, 3, 4}, {3, 4, 5}}), "batch dims differ");
}

TEST(OpSchema, EveryOpHasAReferenceKernel) {
  const KernelRegistry &r = KernelRegistry::builtin();
  for (const OpSchema &s : opSchemas()) {
    for (DType t : operandDTypes(s.operands[0])) {
      KernelKey key{s.name, t, Layout::Plain, KernelBackend::Reference};
      EXPECT_NE(r.find(key), nullptr) << s.name << " " << dtypeName(t);
    }
  }
  // 17 primitive ops + tfm.fused_attention + linear, add_layer_norm, concat, slice_last,
  // last_position + 10 gradient ops + lr_schedule, adam_update, grad_accumulate, sum_squares, clip_scale +
  // cache_reorder, cache_write, cached_attention, gathered_attention, add_position_at, to_bf16 + log_softmax +
  // attention_weights
  EXPECT_EQ(opSchemas().size(), 46u);
}

TEST(OpSchema, FastKernelsAreRegistered) {
  const KernelRegistry &r = KernelRegistry::builtin();
  for (const char *op : {"tfm.matmul", "tfm.batch_matmul", "tfm.softmax", "tfm.layer_norm", "tfm.cached_attention",
                         "tfm.gathered_attention", "tfm.log_softmax", "tfm.cache_write", "tfm.cache_reorder", "tfm.to_bf16"})
    EXPECT_NE(r.find({op, DType::F32, Layout::Plain, KernelBackend::Dnnl}), nullptr) << op;
  for (const char *op : {"tfm.cache_write", "tfm.cache_reorder"})  // bf16 caches
    EXPECT_NE(r.find({op, DType::BF16, Layout::Plain, KernelBackend::Dnnl}), nullptr) << op;
}

// --- load-time checks name the node index, op and loc --------------------------------------

Artifact oneNode(const std::string &op, Attrs attrs, Shape resultShape = {kDyn, 4}) {
  Artifact a;
  a.modelName = "one";
  FunctionBuilder f(a, "forward");
  uint32_t x = f.input("x", DType::F32, {kDyn, 4});
  uint32_t y = f.op("tfm.relu", {x}, DType::F32, {kDyn, 4});
  f.output(f.op(op, {y}, DType::F32, std::move(resultShape), std::move(attrs)));
  f.finish();
  return a;
}

Status loadStatus(const Artifact &a) {
  std::unique_ptr<Model> m;
  return Model::fromArtifact(a, RuntimeOptions{}, m);
}

TEST(LoadChecks, UnknownOp) {
  Status s = loadStatus(oneNode("tfm.frobnicate", {}));
  EXPECT_ERROR(s, "entry 'forward'", "node 1 (tfm.frobnicate at test.yaml:2:3)", "unknown op 'tfm.frobnicate'");
  EXPECT_EQ(s.code(), StatusCode::Unimplemented);
}

TEST(LoadChecks, UnknownAttr) {
  EXPECT_ERROR(loadStatus(oneNode("tfm.scale", {{"factor", AttrValue::ofFloat(2)}, {"bogus", AttrValue::ofInt(1)}})),
               "node 1 (tfm.scale at test.yaml:2:3)", "unknown attribute 'bogus'", "takes factor");
}

TEST(LoadChecks, MissingAndMistypedAttrs) {
  EXPECT_ERROR(loadStatus(oneNode("tfm.scale", {})), "node 1 (tfm.scale", "missing required attribute 'factor'");
  EXPECT_ERROR(loadStatus(oneNode("tfm.scale", {{"factor", AttrValue::ofInt(2)}})), "attribute 'factor' must be Float",
               "got Int");
  EXPECT_ERROR(loadStatus(oneNode("tfm.dropout", {{"rate", AttrValue::ofFloat(1.5)}})), "'rate' must be in [0, 1)");
  EXPECT_ERROR(loadStatus(oneNode("tfm.softmax", {{"axis", AttrValue::ofInt(-1)}})), "unknown attribute 'axis'",
               "takes no attributes");
}

TEST(LoadChecks, WrongArityDtypeRankAndDeclaredShape) {
  {
    Artifact a = oneNode("tfm.relu", {});
    a.functions[0].nodes[1].inputs.push_back(0);
    EXPECT_ERROR(loadStatus(a), "node 1 (tfm.relu", "expects 1 operand, got 2");
  }
  EXPECT_ERROR(loadStatus(oneNode("tfm.split_heads", {{"heads", AttrValue::ofInt(2)}})), "node 1 (tfm.split_heads",
               "operand #0 (input", "must have rank 3");
  EXPECT_ERROR(loadStatus(oneNode("tfm.softmax", {}, {kDyn, 5})), "node 1 (tfm.softmax",
               "declared [?, 5] but its operands imply [?, 4]");
  {
    Artifact a = oneNode("tfm.relu", {});
    a.functions[0].values[0].dtype = DType::I32;
    EXPECT_ERROR(loadStatus(a), "node 0 (tfm.relu", "must be f32, got i32");
  }
}

// --- memory planner ------------------------------------------------------------------------

TEST(MemoryPlanner, ReusesDeadBuffersWithoutOverlappingLiveOnes) {
  // A chain x -> a -> b -> c -> d with a skip a -> d: a stays alive until d.
  Artifact art;
  FunctionBuilder f(art, "f");
  uint32_t x = f.input("x", DType::F32, {kDyn});
  uint32_t a = f.op("tfm.relu", {x}, DType::F32, {kDyn});
  uint32_t b = f.op("tfm.relu", {a}, DType::F32, {kDyn});
  uint32_t c = f.op("tfm.relu", {b}, DType::F32, {kDyn});
  uint32_t d = f.op("tfm.add", {c, a}, DType::F32, {kDyn});
  uint32_t e = f.op("tfm.relu", {d}, DType::F32, {kDyn});
  f.output(e);
  const EntryFunction &fn = f.fn();
  std::vector<size_t> bytes(fn.values.size(), 100);
  MemoryPlan plan = planMemory(fn, bytes);
  auto overlap = [&](uint32_t p, uint32_t q) {
    return plan.offsets[p] < plan.offsets[q] + 128 && plan.offsets[q] < plan.offsets[p] + 128;
  };
  EXPECT_FALSE(overlap(a, b));
  EXPECT_FALSE(overlap(a, c));
  EXPECT_FALSE(overlap(b, c));  // c is produced while b is read
  EXPECT_FALSE(overlap(a, d));
  EXPECT_FALSE(overlap(c, d));
  EXPECT_FALSE(overlap(d, e));
  EXPECT_EQ(plan.offsets[c] % kBufferAlignment, 0u);
  EXPECT_LE(plan.arenaBytes, 3 * 128u);  // b's slot is reused
}

}  // namespace
}  // namespace tfmrt::test
