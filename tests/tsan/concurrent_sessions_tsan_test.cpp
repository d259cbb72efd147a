// concurrent_sessions_check.h under ThreadSanitizer (`scripts/test.sh --tsan`): the artifacts
// tiny-prenorm compiled by tfmc (fused / unfused f32, bf16, int8 with --entries=forward,translate;
// train with --entries=forward,train_step) in $TFMC_TSAN_ARTIFACTS. Run with OMP_NUM_THREADS=1: TSan does not see libgomp's barriers, so
// OpenMP teams would be reported; the sessions' own threads are what this checks.
#include <gtest/gtest.h>

#include <cstdlib>

#include "concurrent_sessions_check.h"

namespace {

namespace cc = tfmrt::test::concurrent;

const std::string kWeights = std::string(TFMC_SOURCE_DIR) + "/tests/golden/tiny-prenorm.weights.safetensors";

std::string artifact(const char *name) {
  const char *dir = std::getenv("TFMC_TSAN_ARTIFACTS");
  return std::string(dir ? dir : ".") + "/" + name + ".tfmx";
}

std::unique_ptr<tfmrt::Model> load(const char *name) {
  std::unique_ptr<tfmrt::Model> model;
  tfmrt::Status s = tfmrt::Model::load(artifact(name), tfmrt::RuntimeOptions{}, model);
  EXPECT_TRUE(s.ok()) << s.message();
  if (model) EXPECT_TRUE(model->loadWeights(kWeights).ok());
  return model;
}

TEST(ConcurrentSessionsTsan, MatchWhatOneThreadGets) {
  for (const char *name : {"fused", "unfused", "bf16", "int8"}) {
    SCOPED_TRACE(name);
    cc::expectConcurrentEqualsSerial([&] { return load(name); }, cc::tinyPrenormWorkload(2));
  }
}

TEST(ConcurrentSessionsTsan, WeightChangesWaitForRunningCalls) {
  auto model = load("fused");
  ASSERT_TRUE(model);
  cc::expectWeightLoadsNeverMix(*model, kWeights, ::testing::TempDir() + "tfmc_tsan_other.safetensors",
                                cc::forwardInputs(4, 31, 50, 44), 20);
}

TEST(ConcurrentSessionsTsan, CheckpointsSavedDuringTrainingAreWhole) {
  cc::expectCheckpointsSavedDuringTrainingWhole([] { return load("train"); },
                                                std::string(TFMC_SOURCE_DIR) + "/tests/golden/tiny-prenorm.io.safetensors",
                                                ::testing::TempDir() + "tfmc_tsan_during");
}

}  // namespace
