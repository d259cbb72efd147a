// bf16 copies of f32 weights for bf16 GEMMs, one per weight and weights version, shared by every
// kernel of a Model (the CPU device holds it). A weight read by several GEMMs (a linear's forward
// product and its backward dX product, a tied embedding's vocabulary projection, the same site in
// the forward and train_step entries) is converted once per version instead of once per site.
// The copy keeps the weight's own element order: oneDNN's run-time-M bf16 GEMM reads it through
// strides as [K, N] or transposed at the same speed (measured), so no transposing reorder is made.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "tfmrt/tensor.h"

namespace tfmrt::gemm {

class Bf16WeightCopies {
public:
  // The bf16 copy (nearest even, gemm::toBf16) of the `count` floats at `weight` as of weights
  // `version`, converted on the first request of that version. The pointer is valid while the
  // weights version is (a newer version may re-convert it in place or free it): read it during
  // the call, do not keep it. Safe from several threads (sessions running at once; a new
  // version is only set while no call runs). Needs cpuHasAvx512Bf16().
  const uint16_t *get(const float *weight, int64_t count, uint64_t version);
  size_t copies() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return copies_.size();
  }
  int64_t conversions() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return conversions_;
  }

private:
  struct Copy {
    Tensor data;
    int64_t count = 0;
    uint64_t version = 0;
  };
  mutable std::mutex mutex_;
  std::unordered_map<const float *, Copy> copies_;  // node-based: a Copy stays put as others are added
  uint64_t newest_ = 0;
  int64_t conversions_ = 0;
};

}  // namespace tfmrt::gemm
