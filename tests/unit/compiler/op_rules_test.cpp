// One op definition: the ops ODS declares and the runtime's op table are the same set, and each rule
// the compiler and the runtime used to disagree on is now enforced by both, the same way: the MLIR
// verifier (compile time) and Model::fromArtifact (load time) accept or reject the same op.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "kernel_registry.h"
#include "op_schema.h"
#include "test_util.h"
#include "tfm/TfmDialect.h"
#include "tfm/rules/OpRules.h"

namespace {

using namespace tfmrt;
using namespace tfmrt::test;

TEST(OpTable, EveryOdsOpTheRuntimeExecutesHasAnEntryAndAReferenceKernel) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<tfm::TfmDialect>();
  size_t executed = 0;
  for (mlir::RegisteredOperationName op : ctx.getRegisteredOperations()) {
    if (op.getDialectNamespace() != "tfm") continue;
    const std::string name = op.getStringRef().str();
    const bool hasRule = op.hasTrait<tfm::OpTrait::ShapeRuleVerified>();
    const tfm::rules::OpRule *rule = tfm::rules::findOp(name);
    ASSERT_EQ(hasRule, rule != nullptr) << name;
    if (!rule) continue;  // tfm.param, tfm.state, tfm.position_table: lowered to values, never nodes
    ++executed;
    EXPECT_TRUE(op.hasInterface<mlir::InferTypeOpInterface>()) << name;
    std::set<std::string> odsAttrs, tableAttrs;
    for (mlir::StringAttr a : op.getAttributeNames()) odsAttrs.insert(a.str());
    for (const auto &a : rule->attrs) tableAttrs.insert(a.name);
    EXPECT_EQ(odsAttrs, tableAttrs) << name;
    for (DType t : operandDTypes(rule->operands[0])) {
      KernelKey key{name, t, Layout::Plain, KernelBackend::Reference};
      EXPECT_NE(KernelRegistry::builtin().find(key), nullptr) << name << " has no " << dtypeName(t) << " reference kernel";
    }
  }
  EXPECT_EQ(executed, tfm::rules::allOps().size());
  EXPECT_EQ(executed, 46u);
}

// The same single op, written as MLIR and as an artifact node.
struct Case {
  std::string what;
  std::string mlir;  // a func.func body around the op
  std::function<Artifact()> artifact;
  bool valid;
  std::string compileError, loadError;  // substrings of the two messages (when !valid)
};

std::string verifyMlir(const std::string &text) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<tfm::TfmDialect, mlir::func::FuncDialect>();
  std::string errors;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    errors += d.str() + "\n";
    return mlir::success();
  });
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  if (module && errors.empty()) return "";
  return errors.empty() ? "parse failed" : errors;
}

std::string loadArtifact(const Artifact &a) {
  std::unique_ptr<Model> model;
  Status s = Model::fromArtifact(a, RuntimeOptions{KernelBackend::Reference, 1}, model);
  return s.ok() ? "" : s.message();
}

Artifact oneNode(const std::string &op, std::vector<std::pair<DType, Shape>> operands, Shape result, Attrs attrs,
                 DType resultType = DType::F32) {
  Artifact a;
  FunctionBuilder f(a, "forward");
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < operands.size(); ++i)
    ids.push_back(f.input("in" + std::to_string(i), operands[i].first, operands[i].second));
  f.output(f.op(op, ids, resultType, result, attrs));
  f.finish();
  return a;
}

AttrValue f64(double v) { return AttrValue::ofFloat(v); }
AttrValue i64(int64_t v) { return AttrValue::ofInt(v); }

std::vector<Case> cases() {
  const DType F = DType::F32, I = DType::I32;
  auto layerNorm = [=](double eps) {
    return [=] { return oneNode("tfm.layer_norm", {{F, {2, 4}}, {F, {4}}, {F, {4}}}, {2, 4}, {{"epsilon", f64(eps)}}); };
  };
  auto layerNormMlir = [](const std::string &eps) {
    return "func.func @f(%x: tensor<2x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) {\n"
           "  %0 = tfm.layer_norm %x, %g, %b {epsilon = " + eps +
           " : f64} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>\n  return\n}\n";
  };
  auto xent = [=](Shape logits, Shape targets, double smoothing) {
    return [=] {
      return oneNode("tfm.label_smoothed_xent", {{F, logits}, {I, targets}}, {}, {{"smoothing", f64(smoothing)}, {"pad_id", i64(0)}});
    };
  };
  auto xentMlir = [](const std::string &logits, const std::string &targets, const std::string &smoothing) {
    return "func.func @f(%l: tensor<" + logits + "xf32>, %t: tensor<" + targets + "xi32>) {\n"
           "  %0 = tfm.label_smoothed_xent %l, %t {smoothing = " + smoothing + " : f64, pad_id = 0 : i64} : (tensor<" +
           logits + "xf32>, tensor<" + targets + "xi32>) -> tensor<f32>\n  return\n}\n";
  };
  return {
      // 1. LayerNorm epsilon: > 0 in the compiler, >= 0 in the runtime before.
      {"layer_norm epsilon 0", layerNormMlir("0.0"), layerNorm(0), false, "(0, inf)", "must be in (0, inf), got 0"},
      {"layer_norm epsilon 1e-12", layerNormMlir("1.0e-12"), layerNorm(1e-12), true, "", ""},
      // 2. Label-smoothed loss: logits rank 3 vs 2..8, smoothing [0, 1) vs [0, 1].
      {"xent rank-2 logits", xentMlir("4x8", "4", "0.1"), xent({4, 8}, {4}, 0.1), false, "rank 3", "must have rank 3"},
      {"xent smoothing 1", xentMlir("2x4x8", "2x4", "1.0"), xent({2, 4, 8}, {2, 4}, 1.0), false, "[0, 1)",
       "must be in [0, 1), got 1"},
      {"xent smoothing 0.99", xentMlir("2x4x8", "2x4", "0.99"), xent({2, 4, 8}, {2, 4}, 0.99), true, "", ""},
      // 3. Embedding ids: rank 2 vs 1..7.
      {"embedding rank-1 ids",
       "func.func @f(%t: tensor<10x4xf32>, %i: tensor<3xi32>) {\n"
       "  %0 = tfm.embedding %t, %i : (tensor<10x4xf32>, tensor<3xi32>) -> tensor<3x4xf32>\n  return\n}\n",
       [=] { return oneNode("tfm.embedding", {{F, {10, 4}}, {I, {3}}}, {3, 4}, {}); }, false, "rank 2", "must have rank 2"},
      // 4. batch_matmul: rank 4 vs 3..8.
      {"batch_matmul rank 3",
       "func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) {\n"
       "  %0 = tfm.batch_matmul %a, %b : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>\n  return\n}\n",
       [=] { return oneNode("tfm.batch_matmul", {{F, {2, 3, 4}}, {F, {2, 4, 5}}}, {2, 3, 5}, {}); }, false, "rank 4",
       "must have rank 4"},
      // 5. split_heads: only the compiler required a static model dim; now neither does (the
      //    runtime checks divisibility once the dim is bound).
      {"split_heads dynamic model dim",
       "func.func @f(%x: tensor<?x?x?xf32>) {\n"
       "  %0 = tfm.split_heads %x {heads = 2 : i64} : (tensor<?x?x?xf32>) -> tensor<?x2x?x?xf32>\n  return\n}\n",
       [=] { return oneNode("tfm.split_heads", {{F, {kDyn, kDyn, kDyn}}}, {kDyn, 2, kDyn, kDyn}, {{"heads", i64(2)}}); }, true,
       "", ""},
      // Open dtypes: GEMM operands are f32 or bf16 (f32 result), both of one type.
      {"matmul bf16 operands",
       "func.func @f(%a: tensor<2x4xbf16>, %b: tensor<3x4xbf16>) {\n"
       "  %0 = tfm.matmul %a, %b {transpose_b = true} : (tensor<2x4xbf16>, tensor<3x4xbf16>) -> tensor<2x3xf32>\n"
       "  return\n}\n",
       [=] {
         return oneNode("tfm.matmul", {{DType::BF16, {2, 4}}, {DType::BF16, {3, 4}}}, {2, 3}, {{"transpose_b", i64(1)}});
       },
       true, "", ""},
      {"matmul f32 x bf16",
       "func.func @f(%a: tensor<2x4xf32>, %b: tensor<3x4xbf16>) {\n"
       "  %0 = tfm.matmul %a, %b {transpose_b = true} : (tensor<2x4xf32>, tensor<3x4xbf16>) -> tensor<2x3xf32>\n"
       "  return\n}\n",
       [=] {
         return oneNode("tfm.matmul", {{F, {2, 4}}, {DType::BF16, {3, 4}}}, {2, 3}, {{"transpose_b", i64(1)}});
       },
       false, "same element type", "operands 'lhs' and 'rhs' must have the same element type, got f32 and bf16"},
      {"layer_norm bf16 input",
       "func.func @f(%x: tensor<2x4xbf16>, %g: tensor<4xf32>, %b: tensor<4xf32>) {\n"
       "  %0 = tfm.layer_norm %x, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<2x4xbf16>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>\n"
       "  return\n}\n",
       [=] { return oneNode("tfm.layer_norm", {{DType::BF16, {2, 4}}, {F, {4}}, {F, {4}}}, {2, 4}, {{"epsilon", f64(1e-5)}}); },
       false, "32-bit float", "must be f32, got bf16"},
      {"split_heads indivisible model dim",
       "func.func @f(%x: tensor<?x?x8xf32>) {\n"
       "  %0 = tfm.split_heads %x {heads = 3 : i64} : (tensor<?x?x8xf32>) -> tensor<?x3x?x2xf32>\n  return\n}\n",
       [=] { return oneNode("tfm.split_heads", {{F, {kDyn, kDyn, 8}}}, {kDyn, 3, kDyn, 2}, {{"heads", i64(3)}}); }, false,
       "model dim 8 of [?, ?, 8] is not divisible by heads = 3", "model dim 8 of [?, ?, 8] is not divisible by heads = 3"},
  };
}

TEST(OpRules, CompilerAndRuntimeAcceptAndRejectTheSameOps) {
  for (const Case &c : cases()) {
    SCOPED_TRACE(c.what);
    const std::string compileError = verifyMlir(c.mlir);
    const std::string loadError = loadArtifact(c.artifact());
    if (c.valid) {
      EXPECT_EQ(compileError, "");
      EXPECT_EQ(loadError, "");
    } else {
      EXPECT_NE(compileError.find(c.compileError), std::string::npos) << compileError;
      EXPECT_NE(loadError.find(c.loadError), std::string::npos) << loadError;
    }
  }
}

}  // namespace
