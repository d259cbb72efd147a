// Translation search over a compiled model's `encode` / `decode` entries: greedy (beam 1) and
// beam search with the GNMT length penalty, batched over sentences.
#pragma once

#include <cstdint>
#include <vector>

#include "tfmrt/runtime.h"

namespace tfmdata {

struct SearchOptions {
  int beam = 4;
  double lengthPenalty = 0.6;   // score / ((5 + length) / 6)^lengthPenalty
  double maxLengthRatio = 1.5;  // output length <= ratio * source length + offset
  int64_t maxLengthOffset = 10;
  int64_t maxLen = 128;  // the model's max_len: no sequence (incl. BOS/EOS) may exceed it
  int32_t pad = 0, bos = 1, eos = 2;
};

// Source subword ids (no EOS: the search appends it) -> output ids (no BOS/EOS).
tfmrt::Status translateBatch(tfmrt::Model &model, const std::vector<std::vector<int32_t>> &sources,
                             const SearchOptions &options, std::vector<std::vector<int32_t>> &outputs);

}  // namespace tfmdata
