// The counter-based dropout mask of tfm.dropout (dialects/tfm/TfmOps.td): element i is kept iff
//   splitmix64(key + i * kGolden) >> 40 >= round(rate * 2^24),
//   key = splitmix64(seed ^ splitmix64(fnv1a64(site) ^ splitmix64(step))).
// Shared by the reference and fast kernels; tests/reference/transformer_ref.py implements the
// same formula for the golden training data.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "format.h"
#include "kernel_registry.h"
#include "op_schema.h"

namespace tfmrt::dropout {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

inline uint64_t splitmix64(uint64_t z) {
  z += kGolden;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t fnv1a64(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

inline uint64_t maskKey(int64_t seed, const std::string &site, int64_t step) {
  return splitmix64(uint64_t(seed) ^ splitmix64(fnv1a64(site) ^ splitmix64(uint64_t(step))));
}

// Elements whose 24-bit draw is below this are dropped.
inline uint32_t dropThreshold(double rate) { return uint32_t(std::llround(rate * double(1u << 24))); }

inline bool kept(uint64_t key, uint64_t i, uint32_t threshold) {
  return uint32_t(splitmix64(key + i * kGolden) >> 40) >= threshold;
}

// The attributes and step check both tfm.dropout kernels share.
class KernelBase : public Kernel {
public:
  Status prepare(const KernelPrepareInfo &info) override {
    rate_ = attrFloat(*info.node, "rate");
    seed_ = attrInt(*info.node, "seed");
    site_ = attrString(*info.node, "site");
    return Status::OK();
  }

protected:
  // The mask key of this call (args has the step operand).
  Status keyOf(const KernelArgs &a, uint64_t &key) const {
    const int32_t step = a.inputs[1].as<int32_t>()[0];
    if (step < 1) return invalidArgument(cat("step must be >= 1 (the step being taken), got ", step));
    key = maskKey(seed_, site_, step);
    return Status::OK();
  }
  double rate_ = 0.0;
  int64_t seed_ = 0;
  std::string site_;
};

}  // namespace tfmrt::dropout
