// Sessions of one Model running at the same time on several threads (Model::Impl::callMutex: shared
// for inference calls) give, bit for bit, what one thread gets calling them one after another:
// every kernel family a compiled model uses (panel GEMMs, oneDNN matmul / batch_matmul / softmax
// of the unfused program, bf16 and int8 weights made on the first call, step attention, cache
// reorder), with the weight-derived copies made while the threads race for them (a fresh model,
// no warm-up call). Weights swapped while sessions run: every result is the old weights' or the
// new ones', never a mix.
#include <atomic>
#include <cstring>
#include <functional>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "golden_util.h"
#include "tfmdata/search.h"
#include "test_util.h"

namespace {

using tfmc::test::compileAndLoad;
using tfmc::test::kSource;

const std::string kWeights = kSource + "/tests/golden/tiny-prenorm.weights.safetensors";

struct Variant {
  const char *name;
  const char *fusion;
  bool bf16, int8;
};

std::unique_ptr<tfmrt::Model> load(const Variant &v) {
  tfmc::ModelSpec spec;
  if (!tfmc::test::parseSpec("tiny-prenorm", spec)) return nullptr;
  tfmc::PipelineOptions pipeline;
  std::string error;
  EXPECT_TRUE(pipeline.parseFusionList(v.fusion, error)) << error;
  pipeline.translate = true;
  pipeline.bf16 = v.bf16;
  pipeline.int8 = v.int8;
  auto model = compileAndLoad(spec, tfmrt::KernelBackend::Dnnl, pipeline);
  if (model) EXPECT_TRUE(model->loadWeights(kWeights).ok());
  return model;
}

// A forward batch of B x 31 positions on both sides: 48 sentences make 1488 rows, past the panel
// GEMM's 1024, so the products run on oneDNN.
std::vector<tfmrt::Tensor> forwardInputs(int64_t B) {
  const int64_t T = 31;
  return {tfmrt::test::randomIds({B, T}, 3, 53, 11), tfmrt::test::randomIds({B, T}, 3, 47, 12),
          tfmrt::test::randomIds({B, T}, 3, 47, 13)};
}

bool sameBits(const tfmrt::Tensor &a, const tfmrt::Tensor &b) {
  return a.dtype == b.dtype && a.shape == b.shape && std::memcmp(a.rawData(), b.rawData(), a.nbytes()) == 0;
}

std::vector<std::vector<int32_t>> sources(int count, uint64_t seed) {
  std::vector<std::vector<int32_t>> out;
  uint64_t x = seed;
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> s;
    for (int j = 0; j < 3 + i % 17; ++j) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      s.push_back(int32_t(3 + (x >> 33) % 50));
    }
    out.push_back(s);
  }
  return out;
}

// Each job runs on its own thread with its own sessions; all start together.
void runTogether(const std::vector<std::function<void()>> &jobs) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (const auto &job : jobs)
    threads.emplace_back([&, job] {
      ++ready;
      while (ready.load() < int(jobs.size())) std::this_thread::yield();
      job();
    });
  for (auto &t : threads) t.join();
}

TEST(ConcurrentSessions, MatchWhatOneThreadGets) {
  const std::vector<Variant> variants = {
      {"fused f32", "all", false, false}, {"unfused f32", "none", false, false},
      {"bf16", "all", true, false},       {"int8", "all", false, true}};
  const auto greedySources = sources(40, 1), beamSources = sources(24, 2);
  const auto forwardIn = forwardInputs(48);
  for (const Variant &v : variants) {
    SCOPED_TRACE(v.name);
    // One thread, one call after another.
    auto serial = load(v);
    ASSERT_TRUE(serial);
    tfmdata::SearchOptions greedy, beam;
    greedy.beam = 1;
    beam.beam = 3;
    greedy.maxLen = beam.maxLen = 32;
    std::vector<std::vector<int32_t>> greedyOut, beamOut;
    ASSERT_TRUE(tfmdata::translateBatch(*serial, greedySources, greedy, greedyOut).ok());
    ASSERT_TRUE(tfmdata::translateBatch(*serial, beamSources, beam, beamOut).ok());
    std::vector<tfmrt::Tensor> logits;
    ASSERT_TRUE(serial->run("forward", forwardIn, logits).ok());
    // Not vacuous: the outputs are not all alike.
    std::set<std::vector<int32_t>> distinct(greedyOut.begin(), greedyOut.end());
    EXPECT_GT(distinct.size(), 10u);

    // A fresh model (weight-derived copies not made yet), three threads at once, three rounds.
    auto shared = load(v);
    ASSERT_TRUE(shared);
    for (int round = 0; round < 3; ++round) {
      std::vector<std::vector<int32_t>> g, b;
      std::vector<tfmrt::Tensor> f;
      bool okG = false, okB = false, okF = false;
      runTogether({[&] { okG = tfmdata::translateBatch(*shared, greedySources, greedy, g).ok(); },
                   [&] { okB = tfmdata::translateBatch(*shared, beamSources, beam, b).ok(); },
                   [&] {
                     std::unique_ptr<tfmrt::Session> session;
                     okF = tfmrt::Session::create(*shared, session).ok() && session->run("forward", forwardIn, f).ok();
                   }});
      ASSERT_TRUE(okG && okB && okF) << "round " << round;
      EXPECT_EQ(g, greedyOut) << "round " << round;
      EXPECT_EQ(b, beamOut) << "round " << round;
      ASSERT_EQ(f.size(), logits.size());
      EXPECT_TRUE(sameBits(f[0], logits[0])) << "round " << round;
    }
  }
}

// One thread loads weights again and again (two sets, alternately) while two others run
// forward: each result equals the forward of one of the two sets, to the bit. The merged Q/K/V
// weights are derived from the weights, so a call that mixed versions would differ.
TEST(ConcurrentSessions, WeightChangesWaitForRunningCalls) {
  const Variant v{"fused f32", "all", false, false};
  auto model = load(v);
  ASSERT_TRUE(model);
  const std::string otherWeights = tfmrt::test::tempPath("other.safetensors");
  const auto in = forwardInputs(4);
  std::vector<tfmrt::Tensor> first, second;
  ASSERT_TRUE(model->run("forward", in, first).ok());
  ASSERT_TRUE(model->initWeights(7).ok());
  ASSERT_TRUE(model->saveWeights(otherWeights).ok());
  ASSERT_TRUE(model->run("forward", in, second).ok());
  ASSERT_FALSE(sameBits(first[0], second[0]));

  std::atomic<bool> done{false};
  std::atomic<int> calls{0}, mixed{0}, failed{0};
  auto runner = [&] {
    std::unique_ptr<tfmrt::Session> session;
    if (!tfmrt::Session::create(*model, session).ok()) {
      ++failed;
      return;
    }
    while (!done.load()) {
      std::vector<tfmrt::Tensor> out;
      if (!session->run("forward", in, out).ok()) ++failed;
      else if (!sameBits(out[0], first[0]) && !sameBits(out[0], second[0])) ++mixed;
      ++calls;
    }
  };
  int loads = 0;
  runTogether({runner, runner, [&] {
                 for (int i = 0; i < 40; ++i) {
                   if (!model->loadWeights(i % 2 ? otherWeights : kWeights).ok()) ++failed;
                   ++loads;
                   std::this_thread::yield();
                 }
                 done = true;
               }});
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(mixed.load(), 0) << "of " << calls.load() << " calls";
  EXPECT_EQ(loads, 40);
  EXPECT_GT(calls.load(), 2);
}

}  // namespace
