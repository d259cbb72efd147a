#include "TokenizerRecord.h"

#include "Commands.h"

#include <iostream>

namespace tfmc {

void recordTokenizer(const tfmdata::Tokenizer &tok, const std::string &path, CheckpointMeta &meta) {
  meta["tokenizer.path"] = path;
  meta["tokenizer.pieces"] = std::to_string(tok.vocabSize());
  meta["tokenizer.fingerprint"] = tok.fingerprint();
}

int checkTokenizer(const char *cmd, const CheckpointMeta &meta, const std::string &checkpoint,
                   const tfmdata::Tokenizer &tok, const std::string &path) {
  auto it = meta.find("tokenizer.fingerprint");
  if (it == meta.end() || it->second == tok.fingerprint()) return 0;
  auto get = [&](const char *key) {
    auto k = meta.find(key);
    return k == meta.end() ? std::string("?") : k->second;
  };
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
