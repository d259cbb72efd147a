// The checks of sessions of one Model running at once on several threads, shared by
// compiler_tests (models compiled in-process) and the ThreadSanitizer build (tests/tsan/: models
// compiled by tfmc, loaded from files): on a fresh model (weight-derived copies not made yet), a
// greedy translation, a beam translation and a forward batch on three threads at once give, bit
// for bit, what one thread gets calling them one after another; weights loaded again and again
// while two threads run forward give results that are always one set's, never a mix;
// checkpoints saved while another thread trains are each one whole step.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tfmdata/search.h"
#include "tfmrt/runtime.h"
#include "tfmrt/safetensors.h"

namespace tfmrt::test::concurrent {

// A model with its weights loaded, fresh on every call; null (failure recorded) on error.
using LoadModel = std::function<std::unique_ptr<Model>()>;

inline bool sameBits(const Tensor &a, const Tensor &b) {
  return a.dtype == b.dtype && a.shape == b.shape && std::memcmp(a.rawData(), b.rawData(), a.nbytes()) == 0;
}

// `count` sources of 3..19 ids in [3, 3 + idRange).
inline std::vector<std::vector<int32_t>> sources(int count, int32_t idRange, uint64_t seed) {
  std::vector<std::vector<int32_t>> out;
  uint64_t x = seed;
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> s;
    for (int j = 0; j < 3 + i % 17; ++j) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      s.push_back(int32_t(3 + (x >> 33) % uint64_t(idRange)));
    }
    out.push_back(s);
  }
  return out;
}

// forward's src, tgt_in, tgt_out: B x T ids in [3, 3 + range) of each vocabulary.
inline std::vector<Tensor> forwardInputs(int64_t B, int64_t T, int32_t srcRange, int32_t tgtRange) {
  auto ids = [&](int32_t range, uint64_t seed) {
    std::vector<int32_t> v(size_t(B * T));
    uint64_t x = seed;
    for (int32_t &id : v) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      id = int32_t(3 + (x >> 33) % uint64_t(range));
    }
    return Tensor::i32({B, T}, v);
  };
  return {ids(srcRange, 11), ids(tgtRange, 12), ids(tgtRange, 13)};
}

// Each job on its own thread; all start together.
inline void runTogether(const std::vector<std::function<void()>> &jobs) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (const auto &job : jobs)
    threads.emplace_back([&ready, &jobs, job] {
      ++ready;
      while (ready.load() < int(jobs.size())) std::this_thread::yield();
      job();
    });
  for (auto &t : threads) t.join();
}

struct Workload {
  std::vector<std::vector<int32_t>> greedySources, beamSources;
  std::vector<Tensor> forward;
  int64_t maxLen = 32;
  int rounds = 3;
};

// For tiny-prenorm (vocabularies 53 / 47, max_len 32): the forward batch (48 x 31 positions: 1488
// rows, past the panel GEMM's 1024) runs its products on oneDNN.
inline Workload tinyPrenormWorkload(int rounds) {
  Workload w;
  w.greedySources = sources(40, 50, 1);
  w.beamSources = sources(24, 50, 2);
  w.forward = forwardInputs(48, 31, 50, 44);
  w.rounds = rounds;
  return w;
}

inline void expectConcurrentEqualsSerial(const LoadModel &load, const Workload &w) {
  auto serial = load();
  ASSERT_TRUE(serial);
  tfmdata::SearchOptions greedy, beam;
  greedy.beam = 1;
  beam.beam = 3;
  greedy.maxLen = beam.maxLen = w.maxLen;
  std::vector<std::vector<int32_t>> greedyOut, beamOut;
  ASSERT_TRUE(tfmdata::translateBatch(*serial, w.greedySources, greedy, greedyOut).ok());
  ASSERT_TRUE(tfmdata::translateBatch(*serial, w.beamSources, beam, beamOut).ok());
  std::vector<Tensor> logits;
  ASSERT_TRUE(serial->run("forward", w.forward, logits).ok());
  // Not vacuous: the outputs are not all alike.
  std::set<std::vector<int32_t>> distinct(greedyOut.begin(), greedyOut.end());
  EXPECT_GT(distinct.size(), w.greedySources.size() / 4);

  auto shared = load();
  ASSERT_TRUE(shared);
  for (int round = 0; round < w.rounds; ++round) {
    std::vector<std::vector<int32_t>> g, b;
    std::vector<Tensor> f;
    bool okG = false, okB = false, okF = false;
    runTogether({[&] { okG = tfmdata::translateBatch(*shared, w.greedySources, greedy, g).ok(); },
                 [&] { okB = tfmdata::translateBatch(*shared, w.beamSources, beam, b).ok(); },
                 [&] {
                   std::unique_ptr<Session> session;
                   okF = Session::create(*shared, session).ok() && session->run("forward", w.forward, f).ok();
                 }});
    ASSERT_TRUE(okG && okB && okF) << "round " << round;
    EXPECT_EQ(g, greedyOut) << "round " << round;
    EXPECT_EQ(b, beamOut) << "round " << round;
    ASSERT_EQ(f.size(), logits.size());
    EXPECT_TRUE(sameBits(f[0], logits[0])) << "round " << round;
  }
}

// `model` holds `weightsA` (a file); `weightsB` is written here from initWeights(7).
inline void expectWeightLoadsNeverMix(Model &model, const std::string &weightsA, const std::string &weightsB,
                                      const std::vector<Tensor> &in, int loads = 40) {
  std::vector<Tensor> first, second;
  ASSERT_TRUE(model.loadWeights(weightsA).ok());
  ASSERT_TRUE(model.run("forward", in, first).ok());
  ASSERT_TRUE(model.initWeights(7).ok());
  ASSERT_TRUE(model.saveWeights(weightsB).ok());
  ASSERT_TRUE(model.run("forward", in, second).ok());
  ASSERT_FALSE(sameBits(first[0], second[0]));

  std::atomic<bool> done{false};
  std::atomic<int> calls{0}, mixed{0}, failed{0}, loaded{0};
  auto runner = [&] {
    std::unique_ptr<Session> session;
    if (!Session::create(model, session).ok()) {
      ++failed;
      return;
    }
    while (!done.load()) {
      std::vector<Tensor> out;
      if (!session->run("forward", in, out).ok()) ++failed;
      else if (!sameBits(out[0], first[0]) && !sameBits(out[0], second[0])) ++mixed;
      ++calls;
    }
  };
  runTogether({runner, runner, [&] {
                 for (int i = 0; i < loads; ++i) {
                   if (!model.loadWeights(i % 2 ? weightsB : weightsA).ok()) ++failed;
                   ++loaded;
                   std::this_thread::yield();
                 }
                 done = true;
               }});
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(mixed.load(), 0) << "of " << calls.load() << " calls";
  EXPECT_EQ(loaded.load(), loads);
  EXPECT_GT(calls.load(), 2);
}

using Snapshot = std::map<std::string, Tensor>;

inline Snapshot weightsOf(const Model &m) {
  Snapshot out;
  for (const auto &p : m.artifact().params) out[p.name] = *m.weight(p.name);
  return out;
}

inline bool sameSnapshot(const Snapshot &a, const Snapshot &b) {
  for (const auto &[name, t] : a)
    if (!sameBits(t, b.at(name))) return false;
  return true;
}

inline float trainStep(Model &m, std::vector<Tensor> batch, int step) {
  batch[3].data<int32_t>()[0] = step;
  std::vector<Tensor> out;
  Status s = m.run("train_step", batch, out);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? out[0].data<float>()[0] : -1.0f;
}

// `load` gives a model with train_step and its weights; `batchFile` holds src, tgt_in, tgt_out.
// Every checkpoint saved on one thread while another trains holds the weights after some step k
// of a run without saves and moments that continue it (the next step's loss and weights are
// step k + 1's): never a mix of two steps. Files are `pathPrefix`<i>.safetensors.
inline void expectCheckpointsSavedDuringTrainingWhole(const LoadModel &load, const std::string &batchFile,
                                                      const std::string &pathPrefix) {
  constexpr int kSteps = 10, kSaves = 16;
  std::map<std::string, Tensor> io;
  ASSERT_TRUE(readSafetensors(batchFile, io).ok());
  const std::vector<Tensor> batch = {io.at("src"), io.at("tgt_in"), io.at("tgt_out"), Tensor::i32({}, {0})};
  auto reference = load(), trained = load(), probe = load();
  ASSERT_TRUE(reference && trained && probe);
  std::vector<Snapshot> after{weightsOf(*reference)};  // after[k]: the weights after step k
  std::vector<float> loss{0.0f};
  for (int step = 1; step <= kSteps; ++step) {
    loss.push_back(trainStep(*reference, batch, step));
    after.push_back(weightsOf(*reference));
  }
  std::vector<std::string> paths;
  for (int i = 0; i < kSaves; ++i) paths.push_back(pathPrefix + std::to_string(i) + ".safetensors");
  std::atomic<int> saveFailures{0};
  runTogether({[&] {
                 for (int step = 1; step <= kSteps; ++step) trainStep(*trained, batch, step);
               },
               [&] {
                 for (const std::string &path : paths) {
                   if (!trained->saveCheckpoint(path, 0).ok()) ++saveFailures;
                   std::this_thread::yield();
                 }
               }});
  EXPECT_EQ(saveFailures.load(), 0);
  for (const std::string &path : paths) {
    int64_t step = 0;
    Status s = probe->loadCheckpoint(path, step);
    ASSERT_TRUE(s.ok()) << path << ": " << s.message();  // the checksum holds
    const Snapshot loaded = weightsOf(*probe);
    int k = -1;
    for (int i = 0; i <= kSteps && k < 0; ++i)
      if (sameSnapshot(loaded, after[size_t(i)])) k = i;
    ASSERT_GE(k, 0) << path << ": weights of no single step";
    if (k == kSteps) continue;
    EXPECT_EQ(trainStep(*probe, batch, k + 1), loss[size_t(k + 1)]) << path << " after step " << k;
    EXPECT_TRUE(sameSnapshot(weightsOf(*probe), after[size_t(k + 1)])) << path << " after step " << k;
  }
}

}  // namespace tfmrt::test::concurrent
