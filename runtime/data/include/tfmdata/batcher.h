// Token-budget batching of a tokenised parallel corpus, deterministic from (seed, epoch) so a
// training run resumed at step k sees exactly the batches it would have seen.
#pragma once

#include <cstdint>
#include <vector>

#include "tfmrt/status.h"
#include "tfmrt/tensor.h"

namespace tfmdata {

struct Example {
  std::vector<int32_t> src, tgt;  // subword ids without BOS/EOS
};

struct BatcherOptions {
  int64_t batchTokens = 4096;  // max batch_size x padded length, over source and target separately
  int64_t maxLen = 128;        // pairs whose source or target (+ BOS/EOS) exceed it are dropped
  int32_t pad = 0, bos = 1, eos = 2;
  uint64_t seed = 1;
};

// The model's inputs for one batch: src [B, S] (ids + EOS), tgt_in [B, T] (BOS + ids), tgt_out
// [B, T] (ids + EOS), padded with `pad`.
struct Batch {
  tfmrt::Tensor src, tgtIn, tgtOut;
  int64_t pairs = 0, srcTokens = 0, tgtTokens = 0;  // real (non-pad) tokens
};

class Batcher {
public:
  // Groups examples of similar length (sorted by target then source length) into batches that
  // fit the token budget. Fails if no example fits.
  static tfmrt::Status create(std::vector<Example> examples, const BatcherOptions &options, Batcher &out);

  int64_t batchesPerEpoch() const { return int64_t(batches_.size()); }
  int64_t droppedTooLong() const { return dropped_; }
  // Pairs longer than the token budget by themselves: each is a batch of its own, over budget.
  int64_t overBudget() const { return overBudget_; }
  int64_t examples() const { return int64_t(examples_.size()); }
  // Batch `index` (0-based) of `epoch` (0-based): the epoch's order is a shuffle seeded by
  // (seed, epoch). Training step k (1-based) uses epoch (k-1) / batchesPerEpoch.
  Batch batch(int64_t epoch, int64_t index) const;
  // Batch `index` in length order, unshuffled (evaluation).
  Batch orderedBatch(int64_t index) const;

private:
  Batch make(const std::vector<int64_t> &members) const;
  const std::vector<int64_t> &epochOrder(int64_t epoch) const;
  BatcherOptions options_;
  // The shuffled batch order of the last epoch asked for (training walks one epoch at a time);
  // batch() is therefore not safe to call concurrently on one Batcher.
  mutable int64_t orderEpoch_ = -1;
  mutable std::vector<int64_t> order_;
  std::vector<Example> examples_;
  std::vector<std::vector<int64_t>> batches_;  // example indices
  int64_t dropped_ = 0;
  int64_t overBudget_ = 0;
};

}  // namespace tfmdata
