// Subword tokenizer: a SentencePiece model whose special ids match the model spec (pad 0, bos 1,
// eos 2, unk 3), shared by source and target (one joint vocabulary, as tied embeddings need).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tfmrt/status.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tfmdata {

struct TokenizerOptions {
  int vocabSize = 8000;
  uint64_t seed = 1;           // reserved: SentencePiece 0.1.97 samples with its own fixed seed
  int maxSentences = 2000000;  // sentences SentencePiece samples for training
};

class Tokenizer {
public:
  ~Tokenizer();
  static tfmrt::Status load(const std::string &path, std::unique_ptr<Tokenizer> &out);
  // Trains on `sentences` and writes the model to `path` (atomically); then loads it.
  static tfmrt::Status train(const std::vector<std::string> &sentences, const TokenizerOptions &options,
                             const std::string &path, std::unique_ptr<Tokenizer> &out);

  // Subword ids, without BOS/EOS.
  tfmrt::Status encode(const std::string &text, std::vector<int32_t> &ids) const;
  std::string decode(const std::vector<int32_t> &ids) const;  // stops at nothing: pass content ids only
  std::string pieces(const std::vector<int32_t> &ids) const;  // the subword pieces, space-separated
  // The id of one piece (as pieces() writes them), or -1 when the vocabulary has no such piece.
  int32_t pieceId(const std::string &piece) const;
  int vocabSize() const;
  // 16 hex digits (FNV-1a 64 over every piece and its score): what decides the segmentation, so
  // a copied or renamed file keeps it and a retrained vocabulary changes it. Checkpoints record
  // it to refuse a mismatching tokenizer by name.
  std::string fingerprint() const;
  // Hex FNV-1a over the whole model (pieces, scores and the normalisation rules, which the
  // fingerprint leaves out: a changed or damaged normaliser table tokenized differently, unseen).
  std::string digest() const;
  int padId() const { return 0; }
  int bosId() const { return 1; }
  int eosId() const { return 2; }
  int unkId() const { return 3; }

private:
  Tokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace tfmdata
