// Unit tests for parseModelSpec*: values and defaults of valid specs, the specs shipped in
// models/, the embedded demo spec, and the shape of diagnostics.
#include "spec/ModelSpec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#ifndef TFMC_SOURCE_DIR
#error "TFMC_SOURCE_DIR must point at the source tree"
#endif

namespace fs = std::filesystem;
using namespace tfmc;

namespace {

std::string modelsDir() { return std::string(TFMC_SOURCE_DIR) + "/models"; }

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string renderAll(const std::vector<SpecDiagnostic> &diags) {
  std::string out;
  for (const SpecDiagnostic &d : diags)
    out += d.render();
  return out;
}

// Parses a file from models/ and fails the test with the rendered diagnostics if it is invalid.
ModelSpec parseModel(const std::string &file) {
  ModelSpec spec;
  std::vector<SpecDiagnostic> diags;
  bool ok = parseModelSpecFile(modelsDir() + "/" + file, spec, diags);
  EXPECT_TRUE(ok) << renderAll(diags);
  EXPECT_TRUE(diags.empty()) << renderAll(diags);
  return spec;
}

const char *kMinimal = R"yaml(name: minimal
model:
  d_model: 64
  heads: 4
  d_ff: 128
  encoder_layers: 2
  decoder_layers: 3
  src_vocab_size: 100
  tgt_vocab_size: 100
)yaml";

} // namespace

TEST(ModelSpec, MinimalSpecTakesDefaults) {
  ModelSpec spec;
  std::vector<SpecDiagnostic> diags;
  ASSERT_TRUE(parseModelSpecText(kMinimal, "minimal.yaml", spec, diags)) << renderAll(diags);
  EXPECT_EQ(spec.name, "minimal");
  EXPECT_EQ(spec.path, "minimal.yaml");
  EXPECT_EQ(spec.model.d_model, 64);
  EXPECT_EQ(spec.model.heads, 4);
  EXPECT_EQ(spec.headDim(), 16);
  EXPECT_EQ(spec.model.d_ff, 128);
  EXPECT_EQ(spec.model.encoder_layers, 2);
  EXPECT_EQ(spec.model.decoder_layers, 3);

  // Everything else comes from ModelSpec.h's defaults.
  const ModelSpec defaults;
  EXPECT_EQ(spec.model.tie_src_tgt_embeddings, defaults.model.tie_src_tgt_embeddings);
  EXPECT_EQ(spec.model.tie_output_projection, defaults.model.tie_output_projection);
  EXPECT_EQ(spec.model.positions, PositionKind::Sinusoidal);
  EXPECT_EQ(spec.model.norm, NormPlacement::Post);
  EXPECT_EQ(spec.model.activation, Activation::ReLU);
  EXPECT_EQ(spec.model.max_len, defaults.model.max_len);
  EXPECT_DOUBLE_EQ(spec.model.layer_norm_eps, defaults.model.layer_norm_eps);
  EXPECT_DOUBLE_EQ(spec.model.dropout, defaults.model.dropout);
  EXPECT_DOUBLE_EQ(spec.model.attention_dropout, defaults.model.attention_dropout);
  EXPECT_DOUBLE_EQ(spec.model.activation_dropout, defaults.model.activation_dropout);
  EXPECT_EQ(spec.model.pad_id, 0);
  EXPECT_EQ(spec.model.bos_id, 1);
  EXPECT_EQ(spec.model.eos_id, 2);
  EXPECT_DOUBLE_EQ(spec.training.label_smoothing, defaults.training.label_smoothing);
  EXPECT_DOUBLE_EQ(spec.training.adam_beta1, defaults.training.adam_beta1);
  EXPECT_DOUBLE_EQ(spec.training.adam_beta2, defaults.training.adam_beta2);
  EXPECT_DOUBLE_EQ(spec.training.adam_eps, defaults.training.adam_eps);
  EXPECT_EQ(spec.training.warmup_steps, defaults.training.warmup_steps);
  EXPECT_DOUBLE_EQ(spec.training.lr_scale, defaults.training.lr_scale);
  EXPECT_EQ(spec.training.batch_tokens, defaults.training.batch_tokens);
  EXPECT_EQ(spec.training.max_steps, defaults.training.max_steps);
  EXPECT_EQ(spec.training.seed, defaults.training.seed);
  EXPECT_EQ(spec.decoding.beam_size, defaults.decoding.beam_size);
  EXPECT_DOUBLE_EQ(spec.decoding.length_penalty, defaults.decoding.length_penalty);
  EXPECT_DOUBLE_EQ(spec.decoding.max_length_ratio, defaults.decoding.max_length_ratio);
  EXPECT_EQ(spec.decoding.max_length_offset, defaults.decoding.max_length_offset);
  EXPECT_EQ(spec.compile.batch, defaults.compile.batch);
  EXPECT_EQ(spec.compile.src_len, defaults.compile.src_len);
  EXPECT_EQ(spec.compile.tgt_len, defaults.compile.tgt_len);
}

TEST(ModelSpec, ParsesEveryValueKind) {
  const char *text = R"yaml(name: kinds
model:
  d_model: 32
  heads: 2
  d_ff: 48
  encoder_layers: 1
  decoder_layers: 1
  src_vocab_size: 40
  tgt_vocab_size: 30
  tie_src_tgt_embeddings: false
  tie_output_projection: False
  positions: learned
  max_len: 20
  norm: pre
  activation: gelu
  layer_norm_eps: 1e-6
  dropout: .25
  attention_dropout: 0
  activation_dropout: 0.5
  pad_id: 3
  bos_id: 4
  eos_id: 5
training:
  label_smoothing: 0.2
  adam_beta1: 0.8
  adam_beta2: 0.99
  adam_eps: 1.0e-8
  warmup_steps: 7
  lr_scale: 2
  batch_tokens: 99
  max_steps: 1000
  seed: 0
decoding:
  beam_size: 5
  length_penalty: 1.0
  max_length_ratio: 2.5
  max_length_offset: 0
compile:
  batch: 3
  src_len: 20
  tgt_len: 11
)yaml";
  ModelSpec spec;
  std::vector<SpecDiagnostic> diags;
  ASSERT_TRUE(parseModelSpecText(text, "kinds.yaml", spec, diags)) << renderAll(diags);
  EXPECT_FALSE(spec.model.tie_src_tgt_embeddings);
  EXPECT_FALSE(spec.model.tie_output_projection);
  EXPECT_EQ(spec.model.positions, PositionKind::Learned);
  EXPECT_EQ(spec.model.norm, NormPlacement::Pre);
  EXPECT_EQ(spec.model.activation, Activation::GELU);
  EXPECT_EQ(spec.model.src_vocab_size, 40);
  EXPECT_EQ(spec.model.tgt_vocab_size, 30);
  EXPECT_EQ(spec.model.max_len, 20);
  EXPECT_DOUBLE_EQ(spec.model.layer_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(spec.model.dropout, 0.25);
  EXPECT_DOUBLE_EQ(spec.model.attention_dropout, 0.0);
  EXPECT_DOUBLE_EQ(spec.model.activation_dropout, 0.5);
  EXPECT_EQ(spec.model.pad_id, 3);
  EXPECT_EQ(spec.model.bos_id, 4);
  EXPECT_EQ(spec.model.eos_id, 5);
  EXPECT_DOUBLE_EQ(spec.training.label_smoothing, 0.2);
  EXPECT_DOUBLE_EQ(spec.training.adam_beta1, 0.8);
  EXPECT_DOUBLE_EQ(spec.training.adam_beta2, 0.99);
  EXPECT_DOUBLE_EQ(spec.training.adam_eps, 1e-8);
  EXPECT_EQ(spec.training.warmup_steps, 7);
  EXPECT_DOUBLE_EQ(spec.training.lr_scale, 2.0);
  EXPECT_EQ(spec.training.batch_tokens, 99);
  EXPECT_EQ(spec.training.max_steps, 1000);
  EXPECT_EQ(spec.training.seed, 0);
  EXPECT_EQ(spec.decoding.beam_size, 5);
  EXPECT_DOUBLE_EQ(spec.decoding.length_penalty, 1.0);
  EXPECT_DOUBLE_EQ(spec.decoding.max_length_ratio, 2.5);
  EXPECT_EQ(spec.decoding.max_length_offset, 0);
  EXPECT_EQ(spec.compile.batch, 3);
  EXPECT_EQ(spec.compile.src_len, 20);
  EXPECT_EQ(spec.compile.tgt_len, 11);
}

// A quoted name is a string like a plain one (`norm: "pre"` was refused with "did you mean
// 'pre'?"); a tag of the key's own type is taken.
TEST(ModelSpec, QuotedNamesAndOwnTypeTags) {
  const char *text = R"yaml(name: tags
model:
  d_model: !!int 32
  heads: 2
  d_ff: 48
  encoder_layers: 1
  decoder_layers: 1
  src_vocab_size: 40
  tgt_vocab_size: 40
  tie_src_tgt_embeddings: !!bool true
  positions: 'learned'
  norm: "pre"
  activation: !!str gelu
  dropout: !!float 0.25
  label_smoothing_unused_here: 0
)yaml";
  ModelSpec spec;
  std::vector<SpecDiagnostic> diags;
  parseModelSpecText(text, "tags.yaml", spec, diags);
  // Only the unknown key is an error.
  ASSERT_EQ(diags.size(), 1u) << renderAll(diags);
  EXPECT_NE(diags[0].message.find("label_smoothing_unused_here"), std::string::npos) << diags[0].message;
  EXPECT_EQ(spec.model.d_model, 32);
  EXPECT_TRUE(spec.model.tie_src_tgt_embeddings);
  EXPECT_EQ(spec.model.positions, PositionKind::Learned);
  EXPECT_EQ(spec.model.norm, NormPlacement::Pre);
  EXPECT_EQ(spec.model.activation, Activation::GELU);
  EXPECT_DOUBLE_EQ(spec.model.dropout, 0.25);
}

TEST(ModelSpec, TinySpecs) {
  ModelSpec tiny = parseModel("tiny.yaml");
  EXPECT_EQ(tiny.name, "tiny");
  EXPECT_EQ(tiny.model.d_model, 32);
  EXPECT_EQ(tiny.model.heads, 4);
  EXPECT_EQ(tiny.model.d_ff, 64);
  EXPECT_EQ(tiny.model.src_vocab_size, 61);
  EXPECT_EQ(tiny.model.max_len, 64);
  EXPECT_EQ(tiny.model.norm, NormPlacement::Post);
  EXPECT_DOUBLE_EQ(tiny.model.layer_norm_eps, 1e-5); // default
  EXPECT_EQ(tiny.compile.batch, 4);
  EXPECT_EQ(tiny.compile.src_len, 9);
  EXPECT_EQ(tiny.compile.tgt_len, 8);

  ModelSpec pre = parseModel("tiny-prenorm.yaml");
  EXPECT_EQ(pre.model.norm, NormPlacement::Pre);
  EXPECT_EQ(pre.model.positions, PositionKind::Learned);
  EXPECT_EQ(pre.model.activation, Activation::GELU);
  EXPECT_FALSE(pre.model.tie_src_tgt_embeddings);
  EXPECT_FALSE(pre.model.tie_output_projection);
  EXPECT_EQ(pre.model.src_vocab_size, 53);
  EXPECT_EQ(pre.model.tgt_vocab_size, 47);
  EXPECT_EQ(pre.model.decoder_layers, 1);
  EXPECT_DOUBLE_EQ(pre.training.label_smoothing, 0.0);
}

TEST(ModelSpec, PaperSpecs) {
  ModelSpec base = parseModel("transformer-base.yaml");
  EXPECT_EQ(base.model.d_model, 512);
  EXPECT_EQ(base.model.heads, 8);
  EXPECT_EQ(base.model.d_ff, 2048);
  EXPECT_EQ(base.model.encoder_layers, 6);
  EXPECT_EQ(base.model.decoder_layers, 6);
  EXPECT_EQ(base.model.src_vocab_size, 37000);
  EXPECT_EQ(base.model.tgt_vocab_size, 37000);
  EXPECT_TRUE(base.model.tie_src_tgt_embeddings);
  EXPECT_TRUE(base.model.tie_output_projection);
  EXPECT_DOUBLE_EQ(base.model.dropout, 0.1);
  EXPECT_DOUBLE_EQ(base.training.adam_beta2, 0.98);
  EXPECT_DOUBLE_EQ(base.training.adam_eps, 1e-9);
  EXPECT_EQ(base.training.warmup_steps, 4000);
  EXPECT_EQ(base.decoding.beam_size, 4);
  EXPECT_DOUBLE_EQ(base.decoding.length_penalty, 0.6);
  EXPECT_EQ(base.compile.batch, 32);
  EXPECT_EQ(base.compile.src_len, 64);

  ModelSpec big = parseModel("transformer-big.yaml");
  EXPECT_EQ(big.model.d_model, 1024);
  EXPECT_EQ(big.model.heads, 16);
  EXPECT_EQ(big.model.d_ff, 4096);
  EXPECT_EQ(big.headDim(), 64);
  EXPECT_DOUBLE_EQ(big.model.dropout, 0.3);
}

TEST(ModelSpec, EveryShippedSpecParsesCleanly) {
  int count = 0;
  for (const auto &entry : fs::directory_iterator(modelsDir())) {
    if (entry.path().extension() != ".yaml")
      continue;
    ++count;
    SCOPED_TRACE(entry.path().string());
    ModelSpec spec;
    std::vector<SpecDiagnostic> diags;
    EXPECT_TRUE(parseModelSpecFile(entry.path().string(), spec, diags)) << renderAll(diags);
    EXPECT_TRUE(diags.empty()) << renderAll(diags);
    EXPECT_EQ(spec.name, entry.path().stem().string()) << "a spec's name matches its file name";
  }
  EXPECT_GE(count, 5) << "expected at least tiny, tiny-prenorm, small, transformer-base/-big";
}

TEST(ModelSpec, EmbeddedDemoSpecIsSmallYaml) {
  ModelSpec spec;
  std::vector<SpecDiagnostic> diags;
  ASSERT_TRUE(parseModelSpecText(embeddedDemoSpec(), "<demo>", spec, diags)) << renderAll(diags);
  EXPECT_EQ(spec.name, "small");
  EXPECT_EQ(spec.model.d_model, 256);
  EXPECT_EQ(spec.model.heads, 4);
  EXPECT_EQ(spec.model.d_ff, 1024);
  EXPECT_EQ(spec.model.encoder_layers, 3);
  EXPECT_EQ(spec.model.src_vocab_size, 8000);
  EXPECT_EQ(spec.model.max_len, 128);
  EXPECT_EQ(spec.compile.src_len, 32);
  EXPECT_EQ(std::string(embeddedDemoSpec()), readFile(modelsDir() + "/small.yaml"))
      << "compiler/spec/DemoSpec.cpp and models/small.yaml must hold the same text";
}

TEST(ModelSpec, KeyLocations) {
  ModelSpec spec;
  std::vector<SpecDiagnostic> diags;
  ASSERT_TRUE(parseModelSpecText(kMinimal, "minimal.yaml", spec, diags));
  EXPECT_EQ(spec.model.loc.file, "minimal.yaml");
  EXPECT_EQ(spec.model.loc.line, 2);
  EXPECT_EQ(spec.model.loc.col, 1);
  SpecLoc heads = spec.locOf("model.heads");
  EXPECT_EQ(heads.line, 4);
  EXPECT_EQ(heads.col, 3);
  // Defaulted key: its section; unknown section: the file.
  EXPECT_EQ(spec.locOf("model.dropout").line, 2);
  EXPECT_EQ(spec.locOf("compile.batch").line, 0);
  EXPECT_EQ(spec.locOf("compile.batch").file, "minimal.yaml");
}

TEST(ModelSpec, ReportsEveryErrorInFileOrder) {
  const char *text = "name: bad\n"
                     "model:\n"
                     "  d_model: 30\n"
                     "  heads: 4\n"
                     "  d_ff: x\n"
                     "  encoder_layers: 1\n"
                     "  decoder_layers: 1\n"
                     "  src_vocab_size: 10\n"
                     "  tgt_vocab_size: 10\n"
                     "  droput: 0.1\n"
                     "compile:\n"
                     "  tgt_len: 0\n";
  ModelSpec spec;
  std::vector<SpecDiagnostic> diags;
  EXPECT_FALSE(parseModelSpecText(text, "bad.yaml", spec, diags));
  ASSERT_EQ(diags.size(), 4u) << renderAll(diags);
  EXPECT_EQ(diags[0].render(), "bad.yaml:4:10: error: 'heads' (4) must divide 'd_model' (30)\n"
                               "  heads: 4\n"
                               "         ^\n");
  EXPECT_EQ(diags[1].line, 5);
  EXPECT_EQ(diags[1].col, 9);
  EXPECT_EQ(diags[1].message, "key 'd_ff' must be an integer, got 'x'");
  EXPECT_EQ(diags[2].message, "unknown key 'droput' in 'model'; did you mean 'dropout'?");
  EXPECT_EQ(diags[3].message, "'tgt_len' must be positive, got 0");
  EXPECT_EQ(diags[3].sourceLine, "  tgt_len: 0");
}

TEST(ModelSpec, ErrorsAreAppendedAndSpecIsReset) {
  std::vector<SpecDiagnostic> diags(1); // an earlier, unrelated diagnostic
  ModelSpec spec;
  spec.name = "stale";
  spec.model.d_ff = 7;
  EXPECT_TRUE(parseModelSpecText(kMinimal, "m.yaml", spec, diags));
  EXPECT_EQ(diags.size(), 1u);
  EXPECT_EQ(spec.model.d_ff, 128);

  EXPECT_FALSE(parseModelSpecText("name: x\n", "x.yaml", spec, diags));
  ASSERT_EQ(diags.size(), 2u);
  EXPECT_EQ(diags[1].message, "missing required key 'model'");
  EXPECT_EQ(spec.name, "x");
}

TEST(ModelSpec, UnreadableFile) {
  ModelSpec spec;
  std::vector<SpecDiagnostic> diags;
  std::string path = modelsDir() + "/no-such-spec.yaml";
  EXPECT_FALSE(parseModelSpecFile(path, spec, diags));
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].render(),
            path + ": error: cannot read spec file: No such file or directory\n");
}

TEST(ModelSpec, SyntaxErrorIsReportedAlone) {
  ModelSpec spec;
  std::vector<SpecDiagnostic> diags;
  EXPECT_FALSE(parseModelSpecText("name: x\nmodel: {d_model: 4\n", "s.yaml", spec, diags));
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].render(), "s.yaml:2:19: error: invalid YAML: end of map flow not found\n"
                               "model: {d_model: 4\n"
                               "                  ^\n");
}

// yaml-cpp 0.7's LoadAll never returns on a stray top-level ','; the parser must not hang.
TEST(ModelSpec, StrayCommaIsAnErrorNotAHang) {
  ModelSpec spec;
  std::vector<SpecDiagnostic> diags;
  EXPECT_FALSE(parseModelSpecText("# comment\n, y\n", "c.yaml", spec, diags));
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].render(), "c.yaml:2:1: error: invalid YAML: unexpected ','\n, y\n^\n");
}

TEST(ModelSpec, SecondDocumentIsAnError) {
  ModelSpec spec;
  std::vector<SpecDiagnostic> diags;
  std::string text = std::string(kMinimal) + "---\nname: other\n";
  EXPECT_FALSE(parseModelSpecText(text, "d.yaml", spec, diags));
  ASSERT_EQ(diags.size(), 1u) << renderAll(diags);
  EXPECT_EQ(diags[0].line, 11);
  // A trailing document marker alone is harmless.
  diags.clear();
  EXPECT_TRUE(parseModelSpecText(std::string(kMinimal) + "---\n", "d.yaml", spec, diags))
      << renderAll(diags);
}

TEST(SpecDiagnostic, CaretFollowsTabsAndUtf8) {
  SpecDiagnostic d;
  d.file = "f.yaml";
  d.line = 3;
  d.message = "m";
  d.sourceLine = "\tn\xC3\xA4me: x"; // "\tnäme: x": 'ä' is two bytes
  d.col = 9;                         // byte column of 'x'
  EXPECT_EQ(d.render(), "f.yaml:3:9: error: m\n\tn\xC3\xA4me: x\n\t      ^\n");
}

TEST(ModelSpec, EnumSpellings) {
  EXPECT_STREQ(toString(PositionKind::Sinusoidal), "sinusoidal");
  EXPECT_STREQ(toString(PositionKind::Learned), "learned");
  EXPECT_STREQ(toString(NormPlacement::Post), "post");
  EXPECT_STREQ(toString(NormPlacement::Pre), "pre");
  EXPECT_STREQ(toString(Activation::ReLU), "relu");
  EXPECT_STREQ(toString(Activation::GELU), "gelu");
}

// A 1 MB value made a 2 MB message (quoted, then its line echoed): both are cut to a window.
TEST(SpecDiagnostic, LongValuesAndLinesAreCut) {
  ModelSpec spec;
  std::vector<SpecDiagnostic> diags;
  const std::string longName(100000, 'x');
  EXPECT_FALSE(parseModelSpecText("name: " + longName + "!\n", "l.yaml", spec, diags));
  ASSERT_FALSE(diags.empty());
  std::string all;
  for (const SpecDiagnostic &d : diags)
    all += d.render();
  EXPECT_LT(all.size(), 2000u) << all.substr(0, 2000);
  EXPECT_NE(all.find("...' (100001 bytes)"), std::string::npos) << all.substr(0, 2000);

  SpecDiagnostic d;
  d.file = "w.yaml";
  d.line = 1;
  d.message = "m";
  d.sourceLine = std::string(300, 'a') + "X" + std::string(300, 'b');
  d.col = 301; // the X
  const std::string shown = d.render();
  // "...", 60 characters before the column, 160 in all, "...", and the caret under the X.
  const std::string expected = "w.yaml:1:301: error: m\n..." + std::string(60, 'a') + "X" + std::string(99, 'b') +
                               "...\n" + std::string(63, ' ') + "^\n";
  EXPECT_EQ(shown, expected);
}
