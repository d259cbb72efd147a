// Sessions of one Model running at the same time on several threads (Model::Impl::callMutex: shared
// for inference calls) give, bit for bit, what one thread gets calling them one after another
// (concurrent_sessions_check.h), on every kernel family a compiled model uses: panel GEMMs,
// oneDNN matmul / batch_matmul / softmax of the unfused program, bf16 and int8 weights made on the
// first call, step attention, cache reorder. The same checks run under ThreadSanitizer
// (tests/tsan/, `scripts/test.sh --tsan`).
#include <gtest/gtest.h>

#include "concurrent_sessions_check.h"
#include "golden_util.h"
#include "test_util.h"

namespace {

using tfmc::test::compileAndLoad;
using tfmc::test::kSource;
namespace cc = tfmrt::test::concurrent;

const std::string kWeights = kSource + "/tests/golden/tiny-prenorm.weights.safetensors";

std::unique_ptr<tfmrt::Model> load(const char *fusion, bool bf16, bool int8) {
  tfmc::ModelSpec spec;
  if (!tfmc::test::parseSpec("tiny-prenorm", spec)) return nullptr;
  tfmc::PipelineOptions pipeline;
  std::string error;
  EXPECT_TRUE(pipeline.parseFusionList(fusion, error)) << error;
  pipeline.translate = true;
  pipeline.bf16 = bf16;
  pipeline.int8 = int8;
  auto model = compileAndLoad(spec, tfmrt::KernelBackend::Dnnl, pipeline);
  if (model) EXPECT_TRUE(model->loadWeights(kWeights).ok());
  return model;
}

TEST(ConcurrentSessions, MatchWhatOneThreadGets) {
  struct Variant {
    const char *name, *fusion;
    bool bf16, int8;
  };
  for (const Variant &v : {Variant{"fused f32", "all", false, false}, Variant{"unfused f32", "none", false, false},
                           Variant{"bf16", "all", true, false}, Variant{"int8", "all", false, true}}) {
    SCOPED_TRACE(v.name);
    cc::expectConcurrentEqualsSerial([&] { return load(v.fusion, v.bf16, v.int8); }, cc::tinyPrenormWorkload(3));
  }
}

// The merged Q/K/V weights are derived from the weights, so a call that mixed two sets would
// give neither set's result.
TEST(ConcurrentSessions, WeightChangesWaitForRunningCalls) {
  auto model = load("all", false, false);
  ASSERT_TRUE(model);
  cc::expectWeightLoadsNeverMix(*model, kWeights, tfmrt::test::tempPath("other.safetensors"),
                                cc::forwardInputs(4, 31, 50, 44));
}

// Checkpoints saved on one thread while another runs training steps are each one whole step.
TEST(ConcurrentSessions, CheckpointsSavedDuringTrainingAreWhole) {
  auto load = [] {
    auto model = compileAndLoad("tiny-prenorm", tfmrt::KernelBackend::Dnnl, "all", false, true);
    if (model) EXPECT_TRUE(model->loadWeights(kWeights).ok());
    return model;
  };
  cc::expectCheckpointsSavedDuringTrainingWhole(load, kSource + "/tests/golden/tiny-prenorm.io.safetensors",
                                                tfmrt::test::tempPath("during"));
}

}  // namespace
