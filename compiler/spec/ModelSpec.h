// The model spec: everything a YAML file under models/ can say about a model.
// Parsed by parseModelSpec (yaml-cpp); no MLIR dependency so the runtime-side
// tools and tests can use it too.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tfmc {

enum class PositionKind { Sinusoidal, Learned };
enum class NormPlacement { Post, Pre };  // Post = the paper; Pre = pre-norm residual blocks.
enum class Activation { ReLU, GELU };

// Spelling of each enum value in a spec file ("sinusoidal", "pre", "gelu", ...).
const char *toString(PositionKind kind);
const char *toString(NormPlacement norm);
const char *toString(Activation act);

// Source location of a key in the spec file (1-based), used by importer diagnostics
// so IR locations point back to the spec line that produced an op.
struct SpecLoc {
  std::string file;
  int line = 0;
  int col = 0;
};

struct ModelSection {
  int64_t d_model = 512;
  int64_t heads = 8;
  int64_t d_ff = 2048;
  int64_t encoder_layers = 6;
  int64_t decoder_layers = 6;
  int64_t src_vocab_size = 0;  // required
  int64_t tgt_vocab_size = 0;  // required
  bool tie_src_tgt_embeddings = true;   // one table for encoder and decoder input
  bool tie_output_projection = true;    // output projection reuses the decoder input table
  PositionKind positions = PositionKind::Sinusoidal;
  int64_t max_len = 256;
  NormPlacement norm = NormPlacement::Post;
  Activation activation = Activation::ReLU;
  double layer_norm_eps = 1e-5;
  double dropout = 0.1;            // residual / embedding dropout
  double attention_dropout = 0.0;  // on attention probabilities
  double activation_dropout = 0.0; // inside the FFN, after the activation
  int64_t pad_id = 0;
  int64_t bos_id = 1;
  int64_t eos_id = 2;
  SpecLoc loc;  // location of the `model:` key
};

struct TrainingSection {
  double label_smoothing = 0.1;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.98;
  double adam_eps = 1e-9;
  int64_t warmup_steps = 4000;
  double lr_scale = 1.0;  // lr = lr_scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
  double lr = 0.0;  // > 0: the peak rate (at step warmup_steps) instead; sets lr_scale
  double clip_norm = 0.0;  // > 0: gradients scaled to a global L2 norm of at most this (0: off)
  double weight_decay = 0.0;  // decoupled (AdamW): p *= 1 - lr * weight_decay every step
  int64_t batch_tokens = 4096;
  int64_t max_steps = 100000;
  int64_t seed = 1;
};

struct DecodingSection {
  int64_t beam_size = 4;
  double length_penalty = 0.6;
  double max_length_ratio = 1.5;  // max target length = ratio * source length + max_length_offset
  int64_t max_length_offset = 10;
};

// Shapes the compiler plans memory for and benchmarks use. The runtime still accepts any
// batch / length up to max_len without recompiling.
struct CompileSection {
  int64_t batch = 32;
  int64_t src_len = 64;
  int64_t tgt_len = 64;
};

struct ModelSpec {
  std::string name;
  std::string path;  // file it was read from
  ModelSection model;
  TrainingSection training;
  DecodingSection decoding;
  CompileSection compile;

  // Where each key that the file spelled out was written, keyed "section.key" ("model.d_model",
  // "compile.src_len"), plus "section" for the section keys themselves and "name".
  std::map<std::string, SpecLoc> keyLocs;

  int64_t headDim() const { return model.d_model / model.heads; }

  // Location of "section.key" if the file spelled it out, else of its section, else the file
  // itself (line 0). Lets later stages point diagnostics at the spec line responsible.
  SpecLoc locOf(const std::string &dottedKey) const;
};

// One diagnostic, already formatted as `file:line:col: error: message` plus the source line
// and a caret, ready to print.
struct SpecDiagnostic {
  std::string file;
  int line = 0;  // 1-based; 0 when unknown
  int col = 0;   // 1-based byte column
  std::string message;
  // "file:line:col: error: message\n<line>\n   ^\n", or "file: error: message\n" when the line is
  // unknown (e.g. the file cannot be read). Always ends with a newline: print it as is.
  std::string render() const;
  std::string sourceLine;  // the offending line, without its newline
};

// Parses a spec. On failure returns false and fills `diags` with every error found (not just
// the first), ordered by position in the file. `text` overload is for tests and embedded specs;
// `path` is used for messages. Diagnostics are appended; `spec` is reset to defaults first.
// A YAML syntax error stops parsing, so it is reported alone. The schema is documented in
// models/README.md ("Spec schema").
bool parseModelSpecFile(const std::string &path, ModelSpec &spec,
                        std::vector<SpecDiagnostic> &diags);
bool parseModelSpecText(const std::string &text, const std::string &path, ModelSpec &spec,
                        std::vector<SpecDiagnostic> &diags);

// The small spec embedded in the binary, used by `tfmc demo` when no file is given. Its text is
// identical to models/small.yaml (a unit test enforces it).
const char *embeddedDemoSpec();

}  // namespace tfmc
