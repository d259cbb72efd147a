// Internal safetensors helpers (the public API is include/tfmrt/safetensors.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tfmrt/safetensors.h"

namespace tfmrt {

// Serializes tensors by reference (no copies of large weights). `tensors` must be sorted by name
// with unique names.
using TensorRefList = std::vector<std::pair<std::string, const Tensor *>>;
Status serializeSafetensorsRefs(const TensorRefList &tensors, const MetadataMap &metadata, std::vector<uint8_t> &bytes);

}  // namespace tfmrt
