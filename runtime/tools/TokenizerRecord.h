// A checkpoint records the tokenizer its model was trained with (file name, piece count and
// fingerprint); training, resuming, averaging and translating refuse a different one by name,
// since a mismatching vocabulary of the same size would otherwise run and produce nonsense.
// A model trained with separate source and target vocabularies (--src-tokenizer and
// --tgt-tokenizer: Marian's --vocabs, fairseq's separate dictionaries) records the target's under
// tgt_tokenizer.*; tokenizer.* is then the source's.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "tfmdata/tokenizer.h"
#include "tfmrt/artifact.h"

namespace tfmc {

struct CommandLine;
using CheckpointMeta = std::map<std::string, std::string>;

// The metadata keys <prefix>path, <prefix>pieces, <prefix>fingerprint, <prefix>digest.
void recordTokenizer(const tfmdata::Tokenizer &tok, const std::string &path, CheckpointMeta &meta,
                     const std::string &prefix = "tokenizer.");
// 0 when `meta` (from `checkpoint`) records this tokenizer under `prefix`, or none (checkpoints
// from before the record, or trained on --inputs); else prints "tfmc <cmd>: error: ..." naming
// both (`what`: "tokenizer", "target tokenizer", ...) and returns 1.
int checkTokenizer(const char *cmd, const CheckpointMeta &meta, const std::string &checkpoint,
                   const tfmdata::Tokenizer &tok, const std::string &path, const std::string &prefix = "tokenizer.",
                   const char *what = "tokenizer");
// The tokenizer keys of `meta` alone, both sides (what averaging carries over).
CheckpointMeta tokenizerKeys(const CheckpointMeta &meta);

// The vocabularies of a command: one joint tokenizer (--tokenizer) or one per side
// (--src-tokenizer and --tgt-tokenizer). `tgt` is `src` when joint.
struct Vocabularies {
  std::unique_ptr<tfmdata::Tokenizer> src, tgtOwned;
  const tfmdata::Tokenizer *tgt = nullptr;
  std::string srcPath, tgtPath;
  bool joint() const { return tgt == src.get(); }
};
// Whether the command line names vocabularies at all, and "" when it names them one way (both
// separate ones, or the joint one alone), else what is wrong.
bool namesVocabularies(const CommandLine &cl);
std::string vocabularyOptionsError(const CommandLine &cl);
// Loads what the (checked) command line names.
int loadVocabularies(const char *cmd, const CommandLine &cl, Vocabularies &v);
// Each side's piece count against the model's vocabulary of that side, and one model for both
// sides when the model has one embedding table for both (shared_embedding.weight: a piece id must
// mean the same piece on either side). 1 and a message if not.
int checkVocabularySizes(const char *cmd, const Vocabularies &v, int64_t srcVocabSize, int64_t tgtVocabSize,
                         bool sharedTable);
// The artifact's model has one embedding table for both sides (tie_src_tgt_embeddings).
bool sharesEmbeddingTable(const tfmrt::Artifact &artifact);
// Both sides into `meta`: tokenizer.* (the source, or the joint one) and, when the target's model
// is another, tgt_tokenizer.*.
void recordVocabularies(const Vocabularies &v, CheckpointMeta &meta);
// Both sides against a checkpoint's record: the source against tokenizer.*, the target against
// tgt_tokenizer.* if recorded, else tokenizer.* (a joint vocabulary may be given as both).
int checkVocabularies(const char *cmd, const CheckpointMeta &meta, const std::string &checkpoint, const Vocabularies &v);

}  // namespace tfmc
