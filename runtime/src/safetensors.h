// Internal safetensors helpers (the public API is include/tfmrt/safetensors.h).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tfmrt/safetensors.h"

namespace tfmrt {

// Serializes tensors by reference (no copies of large weights). `tensors` must be sorted by name
// with unique names.
using TensorRefList = std::vector<std::pair<std::string, const Tensor *>>;
Status serializeSafetensorsRefs(const TensorRefList &tensors, const MetadataMap &metadata, std::vector<uint8_t> &bytes);

// CRC-32 over name, dtype, shape and bytes of every tensor, in name order (independent of the
// file layout): checkpoints' checksum and weights files' (model_checkpoint.cpp).
uint32_t tensorsCrc(const TensorRefList &refs);
uint32_t tensorsCrc(const TensorMap &tensors);

// A tensor parseSafetensors left in the file (see `copy` below): its bytes, as stored.
struct TensorInFile {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr;
  size_t bytes = 0;
};
// parseSafetensors, with every check, but copying out only the tensors `copy` selects (and every
// I64 one, which is converted); the others are described in `inFile`, pointing into `data`,
// which must outlive them. A checkpoint loaded for translation checksums its optimizer moments
// this way instead of copying them into tensors it drops.
Status parseSafetensorsSelected(const uint8_t *data, size_t size, const std::function<bool(const std::string &)> &copy,
                                TensorMap &tensors, std::map<std::string, TensorInFile> &inFile, MetadataMap *metadata,
                                const std::string &src);

}  // namespace tfmrt
