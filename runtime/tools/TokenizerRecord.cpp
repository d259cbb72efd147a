#include "TokenizerRecord.h"

#include "Commands.h"
#include "RunSupport.h"

#include <iostream>

namespace tfmc {

void recordTokenizer(const tfmdata::Tokenizer &tok, const std::string &path, CheckpointMeta &meta,
                     const std::string &prefix) {
  meta[prefix + "path"] = path;
  meta[prefix + "pieces"] = std::to_string(tok.vocabSize());
  meta[prefix + "fingerprint"] = tok.fingerprint();
  meta[prefix + "digest"] = tok.digest();
}

int checkTokenizer(const char *cmd, const CheckpointMeta &meta, const std::string &checkpoint,
                   const tfmdata::Tokenizer &tok, const std::string &path, const std::string &prefix, const char *what) {
  auto it = meta.find(prefix + "fingerprint");
  auto get = [&](const std::string &key) {
    auto k = meta.find(prefix + key);
    return k == meta.end() ? std::string("?") : k->second;
  };
  if (it != meta.end() && it->second == tok.fingerprint()) {
    // Same pieces and scores. Checkpoints since the digest was recorded also compare the rest.
    auto digest = meta.find(prefix + "digest");
    if (digest == meta.end() || digest->second == tok.digest()) return 0;
    std::cerr << commandName(cmd) << ": error: " << what << " '" << path << "' has the pieces of the one checkpoint '"
              << checkpoint << "' was trained with ('" << get("path")
              << "'), but other tokenization settings: normalisation rules or options (model digest " << tok.digest()
              << ", recorded " << digest->second << "): a changed or damaged file, which would tokenize text differently\n";
    return 1;
  }
  if (it == meta.end()) return 0;
  std::cerr << commandName(cmd) << ": error: " << what << " '" << path << "' (" << tok.vocabSize()
            << " pieces, fingerprint " << tok.fingerprint() << ") is not the one checkpoint '" << checkpoint
            << "' was trained with ('" << get("path") << "', " << get("pieces") << " pieces, fingerprint " << it->second
            << ")\n";
  return 1;
}

CheckpointMeta tokenizerKeys(const CheckpointMeta &meta) {
  CheckpointMeta out;
  for (const auto &[key, value] : meta)
    if (key.rfind("tokenizer.", 0) == 0 || key.rfind("tgt_tokenizer.", 0) == 0) out[key] = value;
  return out;
}

bool namesVocabularies(const CommandLine &cl) {
  return cl.has("tokenizer") || cl.has("src-tokenizer") || cl.has("tgt-tokenizer");
}

std::string vocabularyOptionsError(const CommandLine &cl) {
  const bool joint = cl.has("tokenizer"), src = cl.has("src-tokenizer"), tgt = cl.has("tgt-tokenizer");
  if (joint && (src || tgt))
    return "give --tokenizer (one vocabulary for both sides) or --src-tokenizer and --tgt-tokenizer, not both";
  if (src != tgt)
    return std::string(src ? "--src-tokenizer" : "--tgt-tokenizer") + " needs " +
           (src ? "--tgt-tokenizer" : "--src-tokenizer") + " (separate vocabularies name both sides; --tokenizer: one for both)";
  return "";
}

int loadVocabularies(const char *cmd, const CommandLine &cl, Vocabularies &v) {
  if (cl.has("tokenizer")) {
    v.srcPath = v.tgtPath = cl.get("tokenizer");
    if (auto s = tfmdata::Tokenizer::load(v.srcPath, v.src); !s.ok()) return fail(cmd, s);
    v.tgt = v.src.get();
    return 0;
  }
  v.srcPath = cl.get("src-tokenizer");
  v.tgtPath = cl.get("tgt-tokenizer");
  if (auto s = tfmdata::Tokenizer::load(v.srcPath, v.src); !s.ok()) return fail(cmd, s);
  if (auto s = tfmdata::Tokenizer::load(v.tgtPath, v.tgtOwned); !s.ok()) return fail(cmd, s);
  v.tgt = v.tgtOwned.get();
  return 0;
}

namespace {
bool sameModel(const tfmdata::Tokenizer &a, const tfmdata::Tokenizer &b) {
  return a.fingerprint() == b.fingerprint() && a.digest() == b.digest();
}
}  // namespace

int checkVocabularySizes(const char *cmd, const Vocabularies &v, int64_t srcVocabSize, int64_t tgtVocabSize,
                         bool sharedTable) {
  struct Side {
    const tfmdata::Tokenizer *tok;
    const std::string &path;
    const char *what, *key;
    int64_t size;
  };
  const bool joint = v.joint();
  for (const Side &side : {Side{v.src.get(), v.srcPath, joint ? "tokenizer" : "source tokenizer", "model.src_vocab_size", srcVocabSize},
                           Side{v.tgt, v.tgtPath, joint ? "tokenizer" : "target tokenizer", "model.tgt_vocab_size", tgtVocabSize}})
    if (side.size != side.tok->vocabSize()) {
      std::cerr << commandName(cmd) << ": error: " << side.what << " '" << side.path << "' has " << side.tok->vocabSize()
                << " pieces but the model's " << side.key << " is " << side.size
                << (joint && srcVocabSize != tgtVocabSize
                        ? " (the model has separate vocabularies: give --src-tokenizer and --tgt-tokenizer)"
                        : "")
                << "\n";
      return 1;
    }
  if (sharedTable && !sameModel(*v.src, *v.tgt)) {
    std::cerr << commandName(cmd) << ": error: the model has one embedding table for both sides (tie_src_tgt_embeddings), "
              << "so both need one vocabulary, but '" << v.srcPath << "' and '" << v.tgtPath
              << "' are different models: give the joint one as --tokenizer, or compile the spec with "
                 "tie_src_tgt_embeddings: false\n";
    return 1;
  }
  return 0;
}

bool sharesEmbeddingTable(const tfmrt::Artifact &artifact) {
  for (const tfmrt::ParamInfo &p : artifact.params)
    if (p.name == "shared_embedding.weight") return true;
  return false;
}

void recordVocabularies(const Vocabularies &v, CheckpointMeta &meta) {
  recordTokenizer(*v.src, v.srcPath, meta);
  // Recorded by content, not by how the command line named it: the same model given twice is joint.
  if (!sameModel(*v.tgt, *v.src))
    recordTokenizer(*v.tgt, v.tgtPath, meta, "tgt_tokenizer.");
}

int checkVocabularies(const char *cmd, const CheckpointMeta &meta, const std::string &checkpoint, const Vocabularies &v) {
  const bool separate = meta.count("tgt_tokenizer.fingerprint") > 0;
  if (separate && v.joint()) {  // one model cannot be both recorded ones
    auto get = [&](const char *key) {
      auto k = meta.find(key);
      return k == meta.end() ? std::string("?") : k->second;
    };
    std::cerr << commandName(cmd) << ": error: checkpoint '" << checkpoint
              << "' was trained with separate vocabularies (source '" << get("tokenizer.path") << "', target '"
              << get("tgt_tokenizer.path") << "'): give them as --src-tokenizer and --tgt-tokenizer instead of --tokenizer\n";
    return 1;
  }
  if (int code = checkTokenizer(cmd, meta, checkpoint, *v.src, v.srcPath, "tokenizer.",
                                separate || !v.joint() ? "source tokenizer" : "tokenizer"))
    return code;
  return checkTokenizer(cmd, meta, checkpoint, *v.tgt, v.tgtPath, separate ? "tgt_tokenizer." : "tokenizer.",
                        separate || !v.joint() ? "target tokenizer" : "tokenizer");
}

}  // namespace tfmc
