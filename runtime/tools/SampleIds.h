// Deterministic token ids for built-in sample batches (tfmc run / demo / bench): drawn uniformly
// from the vocabulary minus the special ids, so any valid spec works (even pad/bos/eos not being
// 0/1/2, or a vocabulary with no ordinary token, which falls back to eos).
#pragma once

#include <cstdint>
#include <vector>

namespace tfmc {

class SampleIds {
public:
  SampleIds(int64_t vocab, int64_t pad, int64_t bos, int64_t eos, uint64_t seed)
      : fallback_(int32_t(eos)), state_(seed * 0x9E3779B97F4A7C15ull + 1) {
    for (int64_t id = 0; id < vocab; ++id)
      if (id != pad && id != bos && id != eos) ordinary_.push_back(int32_t(id));
  }
  int32_t next() {
    if (ordinary_.empty()) return fallback_;
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return ordinary_[(state_ >> 33) % ordinary_.size()];
  }

private:
  std::vector<int32_t> ordinary_;
  int32_t fallback_;
  uint64_t state_;
};

}  // namespace tfmc
