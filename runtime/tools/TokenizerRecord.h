// A checkpoint records the tokenizer its model was trained with (file name, piece count and
// fingerprint); training, resuming, averaging and translating refuse a different one by name,
// since a mismatching vocabulary of the same size would otherwise run and produce nonsense.
#pragma once

#include <map>
#include <string>

#include "tfmdata/tokenizer.h"

namespace tfmc {

using CheckpointMeta = std::map<std::string, std::string>;

// The checkpoint metadata keys tokenizer.path, tokenizer.pieces, tokenizer.fingerprint.
void recordTokenizer(const tfmdata::Tokenizer &tok, const std::string &path, CheckpointMeta &meta);
// 0 when `meta` (from `checkpoint`) records this tokenizer or none (checkpoints from before the
// record, or trained on --inputs); else prints "tfmc <cmd>: error: ..." naming both and returns 1.
int checkTokenizer(const char *cmd, const CheckpointMeta &meta, const std::string &checkpoint,
                   const tfmdata::Tokenizer &tok, const std::string &path);
// The tokenizer keys of `meta` alone (what averaging carries over).
CheckpointMeta tokenizerKeys(const CheckpointMeta &meta);

}  // namespace tfmc
