// safetensors files (https://github.com/huggingface/safetensors): weights, inputs and golden data.
//
// Layout: u64 little-endian header length N | N bytes of JSON header | data section. The header
// maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
// data section) plus an optional "__metadata__" string map.
//
// Reading accepts F32, I32, BOOL, and I64 (converted to I32; values outside the i32 range are an
// error). Writing emits F32 / I32 / BOOL, tensors sorted by name, header padded with spaces to a
// multiple of 8 bytes so the data section is aligned.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tfmrt/status.h"
#include "tfmrt/tensor.h"

namespace tfmrt {

using TensorMap = std::map<std::string, Tensor>;
using MetadataMap = std::map<std::string, std::string>;

// Strict: malformed JSON, unknown dtypes or header keys, out-of-range / overlapping / mis-sized
// offsets, and truncated files are errors whose message names the file and the tensor.
Status readSafetensors(const std::string &path, TensorMap &tensors, MetadataMap *metadata = nullptr);
Status writeSafetensors(const std::string &path, const TensorMap &tensors, const MetadataMap &metadata = {});

// In-memory forms of the above; `source` names the buffer in error messages.
Status parseSafetensors(const uint8_t *data, size_t size, TensorMap &tensors, MetadataMap *metadata = nullptr,
                        const std::string &source = "<memory>");
Status serializeSafetensors(const TensorMap &tensors, const MetadataMap &metadata, std::vector<uint8_t> &bytes);

}  // namespace tfmrt
