// safetensors parsing (weights, checkpoints, golden data): any bytes give a tensor map or an
// error, never a crash; what parses serialises and parses back to the same tensors.
#include <cstring>

#include "FuzzTarget.h"
#include "tfmrt/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tfmrt::TensorMap tensors;
  tfmrt::MetadataMap metadata;
  if (!tfmrt::parseSafetensors(data, size, tensors, &metadata).ok()) return 0;
  std::vector<uint8_t> bytes;
  FUZZ_CHECK(tfmrt::serializeSafetensors(tensors, metadata, bytes).ok());
  tfmrt::TensorMap again;
  tfmrt::MetadataMap againMeta;
  FUZZ_CHECK(tfmrt::parseSafetensors(bytes.data(), bytes.size(), again, &againMeta).ok());
  FUZZ_CHECK(again.size() == tensors.size() && againMeta == metadata);
  for (const auto &[name, t] : tensors) {
    const tfmrt::Tensor &u = again.at(name);
    FUZZ_CHECK(u.shape == t.shape && u.dtype == t.dtype && u.nbytes() == t.nbytes());
    FUZZ_CHECK(t.nbytes() == 0 || std::memcmp(u.rawData(), t.rawData(), t.nbytes()) == 0);
  }
  return 0;
}
