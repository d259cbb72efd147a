// The compiler pipeline on every shipped spec: parameter table matches models/README.md, the
// artifact survives a write/read round trip, and it loads in the runtime.
#include <map>

#include <gtest/gtest.h>

#include "Pipeline.h"
#include "tfmrt/artifact.h"

namespace {

const std::string kSource = TFMC_SOURCE_DIR;

tfmrt::Artifact compileSpec(const std::string &name, const std::string &fusion = "all") {
  tfmc::ModelSpec spec;
  std::vector<tfmc::SpecDiagnostic> diags;
  EXPECT_TRUE(tfmc::parseModelSpecFile(kSource + "/models/" + name + ".yaml", spec, diags));
  tfmc::PipelineOptions options;
  std::string error;
  EXPECT_TRUE(options.parseFusionList(fusion, error)) << error;
  mlir::MLIRContext context;
  tfmrt::Artifact artifact;
  EXPECT_TRUE(succeeded(tfmc::compileModelSpec(spec, context, artifact, options)));
  return artifact;
}

std::map<std::string, int> opCounts(const tfmrt::Artifact &a) {
  std::map<std::string, int> counts;
  for (const auto &n : a.findFunction("forward")->nodes) counts[n.op]++;
  return counts;
}

int64_t weightCount(const tfmrt::Artifact &a) {
  int64_t n = 0;
  for (const auto &p : a.params) {
    int64_t e = 1;
    for (int64_t d : p.shape) e *= d;
    n += e;
  }
  return n;
}

TEST(Pipeline, BaseModelHasThePapersParameterCount) {
  tfmrt::Artifact a = compileSpec("transformer-base");
  // 6+6 layers, d=512, ff=2048, shared 37000 vocabulary tied three ways, no output bias:
  // encoder layer 4*(512*512+512) + 2*512*2048+2048+512 + 2*2*512 = 3,152,384
  // decoder layer adds a cross-attention block + its norm: 4,204,032
  const int64_t enc = 4 * (512 * 512 + 512) + (512 * 2048 + 2048) + (2048 * 512 + 512) + 4 * 512;
  const int64_t dec = enc + 4 * (512 * 512 + 512) + 2 * 512;
  EXPECT_EQ(weightCount(a), 37000 * 512 + 6 * enc + 6 * dec);
  EXPECT_GE(a.findParam("shared_embedding.weight"), 0);
  EXPECT_LT(a.findParam("output_projection.weight"), 0);
  EXPECT_GE(a.findParam("decoder.layers.5.cross_attn.v_proj.bias"), 0);
}

TEST(Pipeline, UntiedPreNormSpecNamesItsExtraParameters) {
  tfmrt::Artifact a = compileSpec("tiny-prenorm");
  for (const char *name : {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight",
                           "output_projection.weight", "encoder.embed_positions.weight",
                           "decoder.embed_positions.weight", "encoder.final_norm.weight",
                           "decoder.final_norm.bias"})
    EXPECT_GE(a.findParam(name), 0) << name;
  EXPECT_LT(a.findParam("shared_embedding.weight"), 0);
  EXPECT_EQ(a.params[a.findParam("output_projection.weight")].shape,
            (std::vector<int64_t>{47, 32}));
  EXPECT_TRUE(a.constants.empty()) << "learned positions need no sinusoid table";
}

TEST(Pipeline, ArtifactRoundTripsThroughBytes) {
  for (const char *spec : {"tiny", "tiny-prenorm", "small"}) {
    tfmrt::Artifact a = compileSpec(spec);
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(tfmrt::serializeArtifact(a, bytes).ok());
    tfmrt::Artifact b;
    tfmrt::Status status = tfmrt::deserializeArtifact(bytes.data(), bytes.size(), b);
    ASSERT_TRUE(status.ok()) << spec << ": " << status.message();
    std::vector<uint8_t> again;
    ASSERT_TRUE(tfmrt::serializeArtifact(b, again).ok());
    EXPECT_EQ(bytes, again) << spec;
    const tfmrt::EntryFunction *fn = b.findFunction("forward");
    ASSERT_NE(fn, nullptr);
    EXPECT_EQ(fn->inputs.size(), 3u);
    EXPECT_EQ(fn->outputs.size(), 2u);
  }
}

// The unfused attention pattern exists as separate kernels before any fusion pass.
TEST(Pipeline, AttentionIsEmittedAsPrimitiveOps) {
  tfmrt::Artifact a = compileSpec("tiny", "none");
  const tfmrt::EntryFunction *fn = a.findFunction("forward");
  ASSERT_NE(fn, nullptr);
  int softmax = 0, mask = 0, causal = 0;
  for (const auto &n : fn->nodes) {
    softmax += n.op == "tfm.softmax";
    if (n.op == "tfm.mask") {
      ++mask;
      causal += n.attrs.at("causal").i;
    }
  }
  // tiny: 2 encoder self-attentions, 2 decoder self- and 2 cross-attentions.
  EXPECT_EQ(softmax, 6);
  EXPECT_EQ(mask, 6);
  EXPECT_EQ(causal, 2);
}

// tiny (post-norm, 2+2 layers): every attention site fused, every bias GEMM a linear, every
// residual join an add_layer_norm, and nothing of the primitive chain left.
TEST(Pipeline, FullFusionLeavesNoPrimitiveAttention) {
  auto counts = opCounts(compileSpec("tiny", "all"));
  EXPECT_EQ(counts["tfm.fused_attention"], 6);
  for (const char *op : {"tfm.softmax", "tfm.mask", "tfm.batch_matmul", "tfm.split_heads",
                         "tfm.merge_heads", "tfm.slice_last", "tfm.bias_add", "tfm.dropout",
                         "tfm.relu", "tfm.layer_norm", "tfm.add"})
    EXPECT_EQ(counts[op], 0) << op;
  // Per encoder layer: QKV, out, fc1, fc2; per decoder layer: QKV, out, Q, KV, out, fc1, fc2.
  EXPECT_EQ(counts["tfm.linear"], 2 * 4 + 2 * 7);
  EXPECT_EQ(counts["tfm.add_layer_norm"], 2 * 2 + 2 * 3);
  EXPECT_EQ(counts["tfm.matmul"], 1);  // the bias-free output projection
}

// Pre-norm: residual adds fold into the GEMMs instead (their sums feed the next LayerNorm and
// the next residual) -- except the last one of each stack, whose only user is the final norm.
TEST(Pipeline, PreNormFoldsResidualsIntoGemms) {
  tfmrt::Artifact a = compileSpec("tiny-prenorm", "all");
  int withResidual = 0;
  for (const auto &n : a.findFunction("forward")->nodes)
    if (n.op == "tfm.linear" && n.inputs.size() == 4) ++withResidual;
  // 2 encoder layers x 2 blocks + 1 decoder layer x 3 blocks, minus the two before final norms.
  EXPECT_EQ(withResidual, 7 - 2);
  EXPECT_EQ(opCounts(a)["tfm.add_layer_norm"], 2);
  EXPECT_EQ(opCounts(a)["tfm.add"], 0);
}

TEST(Pipeline, FusionListSelectsPasses) {
  auto epiloguesOnly = opCounts(compileSpec("tiny", "epilogues"));
  EXPECT_EQ(epiloguesOnly["tfm.fused_attention"], 0);
  EXPECT_EQ(epiloguesOnly["tfm.softmax"], 6);
  EXPECT_GT(epiloguesOnly["tfm.linear"], 0);
  // Without merged projections, Q/K/V are separate tensors; causal self-attention still fuses.
  auto attentionOnly = opCounts(compileSpec("tiny", "attention"));
  EXPECT_EQ(attentionOnly["tfm.fused_attention"], 6);
  EXPECT_EQ(attentionOnly["tfm.concat"], 0);
  auto none = opCounts(compileSpec("tiny", "none"));
  EXPECT_EQ(none["tfm.linear"], 0);
  EXPECT_EQ(none["tfm.concat"], 0);
  tfmc::PipelineOptions options;
  std::string error;
  EXPECT_FALSE(options.parseFusionList("attention,bogus", error));
  EXPECT_NE(error.find("unknown fusion pass 'bogus'"), std::string::npos) << error;
  // A trailing comma was taken (getline drops the empty last item), a leading one refused.
  for (const char *list : {"attention,", ",attention", "attention,,layouts"}) {
    EXPECT_FALSE(options.parseFusionList(list, error)) << list;
    EXPECT_NE(error.find("an empty item"), std::string::npos) << error;
  }
}

}  // namespace
