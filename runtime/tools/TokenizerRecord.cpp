#include "TokenizerRecord.h"

#include "Commands.h"

#include <iostream>

namespace tfmc {

void recordTokenizer(const tfmdata::Tokenizer &tok, const std::string &path, CheckpointMeta &meta) {
  meta["tokenizer.path"] = path;
  meta["tokenizer.pieces"] = std::to_string(tok.vocabSize());
  meta["tokenizer.fingerprint"] = tok.fingerprint();
  meta["tokenizer.digest"] = tok.digest();
}

int checkTokenizer(const char *cmd, const CheckpointMeta &meta, const std::string &checkpoint,
                   const tfmdata::Tokenizer &tok, const std::string &path) {
  auto it = meta.find("tokenizer.fingerprint");
  auto get = [&](const char *key) {
    auto k = meta.find(key);
    return k == meta.end() ? std::string("?") : k->second;
  };
  if (it != meta.end() && it->second == tok.fingerprint()) {
    // Same pieces and scores. Checkpoints since the digest was recorded also compare the rest.
    auto digest = meta.find("tokenizer.digest");
    if (digest == meta.end() || digest->second == tok.digest()) return 0;
    std::cerr << commandName(cmd) << ": error: tokenizer '" << path << "' has the pieces of the one checkpoint '"
              << checkpoint << "' was trained with ('" << get("tokenizer.path")
              << "'), but other tokenization settings: normalisation rules or options (model digest " << tok.digest() << ", recorded " << digest->second
              << "): a changed or damaged file, which would tokenize text differently\n";
    return 1;
  }
  if (it == meta.end()) return 0;
  std::cerr << commandName(cmd) << ": error: tokenizer '" << path << "' (" << tok.vocabSize() << " pieces, fingerprint "
            << tok.fingerprint() << ") is not the one checkpoint '" << checkpoint << "' was trained with ('"
            << get("tokenizer.path") << "', " << get("tokenizer.pieces") << " pieces, fingerprint " << it->second
            << ")\n";
  return 1;
}

CheckpointMeta tokenizerKeys(const CheckpointMeta &meta) {
  CheckpointMeta out;
  for (const auto &[key, value] : meta)
    if (key.rfind("tokenizer.", 0) == 0) out[key] = value;
  return out;
}

}  // namespace tfmc
