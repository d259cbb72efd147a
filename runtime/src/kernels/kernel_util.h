// Helpers shared by kernel implementations.
#pragma once

#include <cstdint>
#include <memory>

#include "kernel_registry.h"

namespace tfmrt {

// Below this many elements an OpenMP region costs more than it saves.
constexpr int64_t kParallelMinElements = 1 << 15;

template <typename K>
std::unique_ptr<Kernel> makeKernel() {
  return std::make_unique<K>();
}

// Number of rows when a tensor is viewed as [rows, lastDim].
inline int64_t rowsOf(const TensorRef &t) {
  int64_t last = t.rank() ? t.dim(-1) : 1;
  return last ? t.numel() / last : 0;
}

}  // namespace tfmrt
