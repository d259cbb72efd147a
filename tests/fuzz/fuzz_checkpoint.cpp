// Checkpoint loading into a compiled training model (models/tiny.yaml with train_step, built
// by CMake): any file is loaded or refused, never a crash, and a refused file changes nothing
// (weights and optimizer state keep training exactly as before).
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "FuzzTarget.h"
#include "tfmrt/runtime.h"

namespace {
std::unique_ptr<tfmrt::Model> gModel;
std::string gPath;
// The weights as they were before the current input: compared with memcmp after a refusal and
// refreshed after an accepted load (a byte-wise hash of every weight, twice per input, was most
// of the harness's time under ASan).
std::vector<std::vector<uint8_t>> gSnapshot;

void snapshot() {
  const auto &params = gModel->artifact().params;
  gSnapshot.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const tfmrt::Tensor *w = gModel->weight(params[i].name);
    const auto *b = static_cast<const uint8_t *>(w->rawData());
    gSnapshot[i].assign(b, b + w->nbytes());
  }
}

bool unchanged() {
  const auto &params = gModel->artifact().params;
  for (size_t i = 0; i < params.size(); ++i) {
    const tfmrt::Tensor *w = gModel->weight(params[i].name);
    if (w->nbytes() != gSnapshot[i].size() || std::memcmp(w->rawData(), gSnapshot[i].data(), w->nbytes()) != 0)
      return false;
  }
  return true;
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
  snapshot();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::FILE *f = std::fopen(gPath.c_str(), "wb");
  if (!f) std::abort();
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  int64_t step = 0;
  std::map<std::string, std::string> meta;
  tfmrt::Status s = gModel->loadCheckpoint(gPath, step, &meta);
  if (!s.ok()) FUZZ_CHECK(unchanged() && !s.message().empty());
  else snapshot();
  std::remove(gPath.c_str());
  return 0;
}
