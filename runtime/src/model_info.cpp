#include "tfmrt/model_info.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <vector>

namespace tfmrt {
namespace {

// One row per key: where it lives in ModelInfo and its smallest valid value.
struct IntField {
  const char *key;
  int64_t ModelInfo::*field;
  int64_t min;
};
struct FloatField {
  const char *key;
  double ModelInfo::*field;
  double min, max;
};
struct TextField {
  const char *key;
  std::string ModelInfo::*field;
};

const std::vector<IntField> &intFields() {
  static const std::vector<IntField> f = {
      {"model.d_model", &ModelInfo::dModel, 0},          {"model.heads", &ModelInfo::heads, 0},
      {"model.d_ff", &ModelInfo::dFF, 0},                {"model.encoder_layers", &ModelInfo::encoderLayers, 0},
      {"model.decoder_layers", &ModelInfo::decoderLayers, 0},
      {"model.src_vocab_size", &ModelInfo::srcVocabSize, 1}, {"model.tgt_vocab_size", &ModelInfo::tgtVocabSize, 1},
      {"model.max_len", &ModelInfo::maxLen, 1},           {"model.pad_id", &ModelInfo::padId, 0},
      {"model.bos_id", &ModelInfo::bosId, 0},             {"model.eos_id", &ModelInfo::eosId, 0},
      {"training.batch_tokens", &ModelInfo::batchTokens, 1}, {"training.max_steps", &ModelInfo::maxSteps, 0},
      {"training.seed", &ModelInfo::seed, INT64_MIN},     {"decoding.beam_size", &ModelInfo::beamSize, 1},
      {"decoding.max_length_offset", &ModelInfo::maxLengthOffset, 0},
      {"compile.batch", &ModelInfo::compileBatch, 1},    {"compile.src_len", &ModelInfo::compileSrcLen, 1},
      {"compile.tgt_len", &ModelInfo::compileTgtLen, 1},  {"schedule.warmup_steps", &ModelInfo::warmupSteps, 1},
  };
  return f;
}

const std::vector<FloatField> &floatFields() {
  static const std::vector<FloatField> f = {
      {"training.label_smoothing", &ModelInfo::labelSmoothing, 0, 1},
      {"decoding.length_penalty", &ModelInfo::lengthPenalty, -1e6, 1e6},
      {"decoding.max_length_ratio", &ModelInfo::maxLengthRatio, 0, 1e6},
      {"schedule.lr_scale", &ModelInfo::lrScale, 0, 1e300},  // any finite positive value the spec allows
      {"train.dropout", &ModelInfo::dropout, 0, 1},            {"train.attention_dropout", &ModelInfo::attentionDropout, 0, 1},
      {"train.activation_dropout", &ModelInfo::activationDropout, 0, 1},
      {"train.adam_beta1", &ModelInfo::adamBeta1, 0, 1},       {"train.adam_beta2", &ModelInfo::adamBeta2, 0, 1},
      {"train.adam_eps", &ModelInfo::adamEps, 0, 1e300},      {"train.clip_norm", &ModelInfo::clipNorm, 0, 1e300},
      {"train.weight_decay", &ModelInfo::weightDecay, 0, 1},
  };
  return f;
}

const std::vector<TextField> &textFields() {
  static const std::vector<TextField> f = {
      {"spec.path", &ModelInfo::specPath},      {"model.positions", &ModelInfo::positions},
      {"model.norm", &ModelInfo::norm},         {"model.activation", &ModelInfo::activation},
  };
  return f;
}

// "%e", as artifacts have always recorded floats: checkpoints fingerprint the model's metadata
// text, so a different spelling of the same value would refuse every existing checkpoint.
std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%e", v);
  return buf;
}

Status bad(const std::string &key, const std::string &value, const std::string &why) {
  return invalidArgument("artifact metadata '" + key + "' = '" + value + "': " + why);
}

}  // namespace

std::map<std::string, std::string> toMetadata(const ModelInfo &info) {
  std::map<std::string, std::string> md;
  for (const IntField &f : intFields()) md[f.key] = std::to_string(info.*f.field);
  for (const FloatField &f : floatFields()) md[f.key] = number(info.*f.field);
  for (const TextField &f : textFields()) md[f.key] = info.*f.field;
  return md;
}

Status readModelInfo(const Artifact &artifact, ModelInfo &info) {
  info = ModelInfo();
  const auto &md = artifact.metadata;
  for (const IntField &f : intFields()) {
    auto it = md.find(f.key);
    if (it == md.end()) continue;
    char *end = nullptr;
    errno = 0;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || errno == ERANGE) return bad(f.key, it->second, "not an integer");
    if (v < f.min) return bad(f.key, it->second, "must be >= " + std::to_string(f.min));
    info.*f.field = v;
  }
  for (const FloatField &f : floatFields()) {
    auto it = md.find(f.key);
    if (it == md.end()) continue;
    char *end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0' || !std::isfinite(v)) return bad(f.key, it->second, "not a number");
    if (v < f.min || v > f.max) return bad(f.key, it->second, "out of range");
    info.*f.field = v;
  }
  for (const TextField &f : textFields()) {
    auto it = md.find(f.key);
    if (it != md.end()) info.*f.field = it->second;
  }
  info.scheduleKnown = md.count("schedule.lr_scale") && md.count("schedule.warmup_steps");
  return Status::OK();
}

}  // namespace tfmrt
