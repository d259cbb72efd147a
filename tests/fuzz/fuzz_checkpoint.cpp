// Checkpoint loading into a compiled training model (models/tiny.yaml with train_step, built
// by CMake): any file is loaded or refused, never a crash, and a refused file changes nothing
// (weights and optimizer state keep training exactly as before).
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>

#include "FuzzTarget.h"
#include "tfmrt/runtime.h"

namespace {
std::unique_ptr<tfmrt::Model> gModel;
std::string gPath;

uint64_t weightsHash(const tfmrt::Model &m) {
  uint64_t h = 1469598103934665603ull;
  for (const auto &p : m.artifact().params) {
    const tfmrt::Tensor *w = m.weight(p.name);
    const auto *b = static_cast<const uint8_t *>(w->rawData());
    for (size_t i = 0; i < w->nbytes(); ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  return h;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  tfmrt::RuntimeOptions options;
  options.backend = tfmrt::KernelBackend::Reference;
  tfmrt::Status s = tfmrt::Model::load(TFMC_FUZZ_TINY_ARTIFACT, options, gModel);
  if (!s.ok() || !gModel->initWeights(1).ok()) {
    std::fprintf(stderr, "fuzz_checkpoint: cannot load %s: %s\n", TFMC_FUZZ_TINY_ARTIFACT, s.message().c_str());
    std::abort();
  }
  gPath = "/tmp/tfmc_fuzz_checkpoint_" + std::to_string(::getpid());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::FILE *f = std::fopen(gPath.c_str(), "wb");
  if (!f) std::abort();
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  const uint64_t before = weightsHash(*gModel);
  int64_t step = 0;
  std::map<std::string, std::string> meta;
  tfmrt::Status s = gModel->loadCheckpoint(gPath, step, &meta);
  if (!s.ok()) FUZZ_CHECK(weightsHash(*gModel) == before && !s.message().empty());
  std::remove(gPath.c_str());
  return 0;
}
