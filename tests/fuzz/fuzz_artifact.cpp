// Artifact loading past the checksum: the input is an artifact payload; the harness writes a
// valid header (magic, version, size, CRC) around it, so the fuzzer explores the payload reader,
// validateArtifact and the runtime's verification of nodes, shapes and kernels (Model creation)
// rather than the CRC check. Accepted artifacts serialise back to the same bytes.
#include <cstring>
#include <memory>

#include "FuzzTarget.h"
#include "tfmrt/artifact.h"
#include "tfmrt/runtime.h"

namespace {
void putLE(std::vector<uint8_t> &b, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) b[at + size_t(i)] = uint8_t(v >> (8 * i));
}
uint32_t crc32(const uint8_t *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<uint8_t> file;
  if (!tfmrt::serializeArtifact(tfmrt::Artifact{}, file).ok()) std::abort();
  file.resize(28);  // the header: magic 8, version 4, reserved 4, payload size 8, CRC-32 4
  file.insert(file.end(), data, data + size);
  putLE(file, 16, size, 8);
  putLE(file, 24, crc32(data, size), 4);
  tfmrt::Artifact artifact;
  if (!tfmrt::deserializeArtifact(file.data(), file.size(), artifact).ok()) return 0;
  std::vector<uint8_t> again;
  FUZZ_CHECK(tfmrt::serializeArtifact(artifact, again).ok());
  tfmrt::Artifact reread;
  FUZZ_CHECK(tfmrt::deserializeArtifact(again.data(), again.size(), reread).ok());
  std::vector<uint8_t> third;
  FUZZ_CHECK(tfmrt::serializeArtifact(reread, third).ok() && third == again);
  // The runtime's own checks (schemas, shape rules, kernels) on what the loader accepted.
  tfmrt::RuntimeOptions options;
  options.backend = tfmrt::KernelBackend::Reference;
  std::unique_ptr<tfmrt::Model> model;
  (void)tfmrt::Model::fromArtifact(std::move(artifact), options, model);
  return 0;
}
