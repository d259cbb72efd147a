// Translation search (tfmdata::translateBatch over the encode/decode entries) against an
// independent greedy decoder built on the forward entry: at every step, run forward on the
// prefix and take the argmax of the last position.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "golden_util.h"
#include "tfmdata/search.h"
#include "tfmrt/safetensors.h"

namespace {

using tfmc::test::compileAndLoad;
using tfmc::test::kSource;

// Greedy over `forward` for one source (ids without EOS), up to maxOut tokens (EOS included).
// `eosSecond` (optional) counts the steps where </s> had the second-highest logit.
// With `minLength` / `ngram` (the search's constraints, written independently here): no </s>
// before minLength tokens, and no token w whose n-gram (last ngram - 1 tokens, w) already occurs.
bool repeatsNgram(const std::vector<int32_t> &out, int32_t w, int ngram) {
  if (ngram <= 0 || int64_t(out.size()) < ngram - 1) return false;
  std::vector<int32_t> seq = out;
  seq.push_back(w);
  std::set<std::vector<int32_t>> seen;
  for (size_t i = 0; i + size_t(ngram) <= out.size(); ++i)
    seen.insert(std::vector<int32_t>(out.begin() + long(i), out.begin() + long(i) + ngram));
  return seen.count(std::vector<int32_t>(seq.end() - ngram, seq.end())) > 0;
}

// `start`: output tokens taken as given (a target prefix), the argmax continuing after them.
std::vector<int32_t> greedyViaForward(tfmrt::Model &m, const std::vector<int32_t> &src, int64_t maxOut,
                                      int *eosSecond = nullptr, int64_t minLength = 0, int ngram = 0,
                                      const std::vector<int32_t> &start = {}) {
  std::vector<int32_t> srcIds = src;
  srcIds.push_back(2);
  std::vector<int32_t> out = start;
  for (int64_t t = int64_t(start.size()); t < maxOut; ++t) {
    std::vector<int32_t> in{1};
    in.insert(in.end(), out.begin(), out.end());
    const int64_t T = int64_t(in.size());
    std::vector<tfmrt::Tensor> res;
    tfmrt::Status s = m.run("forward",
                            {tfmrt::Tensor::i32({1, int64_t(srcIds.size())}, srcIds), tfmrt::Tensor::i32({1, T}, in),
                             tfmrt::Tensor::i32({1, T}, std::vector<int32_t>(size_t(T), 0))},
                            res);
    EXPECT_TRUE(s.ok()) << s.message();
    const int64_t V = res[0].shape[2];
    const float *z = res[0].data<float>() + (T - 1) * V;
    // Argmax over the tokens a search may emit: not padding (0), not BOS (1), nor what the
    // constraints ban.
    int32_t best = -1;
    for (int32_t v = 2; v < int32_t(V); ++v) {
      if ((v == 2 && int64_t(out.size()) < minLength) || repeatsNgram(out, v, ngram)) continue;
      if (best < 0 || z[v] > z[best]) best = v;
    }
    if (eosSecond && best != 2) {
      int higher = 0;
      for (int64_t v = 2; v < V; ++v) higher += z[v] > z[2];
      *eosSecond += higher == 1;
    }
    if (best == 2) break;
    out.push_back(best);
  }
  return out;
}

TEST(Search, GreedyBatchMatchesForwardDecoding) {
  for (const char *spec : {"tiny", "tiny-prenorm"}) {
    auto model = compileAndLoad(spec, tfmrt::KernelBackend::Dnnl, "all", false, false, /*translate=*/true);
    ASSERT_TRUE(model);
    ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/" + spec + ".weights.safetensors").ok());
    // Sources of different lengths in one batch: padding must not change any row's output.
    const std::vector<std::vector<int32_t>> sources{{5, 9, 13, 7, 21}, {30}, {11, 12, 13, 14, 15, 16, 17, 18}, {4, 4}};
    tfmdata::SearchOptions o;
    o.beam = 1;
    o.maxLengthRatio = 1.0;
    o.maxLengthOffset = 3;
    o.maxLen = 32;
    std::vector<std::vector<int32_t>> batched;
    ASSERT_TRUE(tfmdata::translateBatch(*model, sources, o, batched).ok());
    ASSERT_EQ(batched.size(), sources.size());
    size_t generated = 0;
    for (const auto &b : batched) generated += b.size();
    EXPECT_GT(generated, 4u) << "the comparison needs outputs that are not all empty";
    for (size_t i = 0; i < sources.size(); ++i) {
      const int64_t maxOut = int64_t(sources[i].size()) + 3;
      EXPECT_EQ(batched[i], greedyViaForward(*model, sources[i], maxOut)) << spec << " sentence " << i;
      EXPECT_LT(int64_t(batched[i].size()), maxOut + 1);
    }
  }
}

// Beam search is deterministic, and a beam of 1 is greedy.
TEST(Search, BeamIsDeterministicAndBeamOneIsGreedy) {
  auto model = compileAndLoad("tiny", tfmrt::KernelBackend::Dnnl, "all", false, false, true);
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/tiny.weights.safetensors").ok());
  const std::vector<std::vector<int32_t>> sources{{5, 9, 13, 7, 21}, {30, 31, 32}};
  tfmdata::SearchOptions o;
  o.maxLen = 32;
  std::vector<std::vector<int32_t>> a, b, one;
  o.beam = 4;
  ASSERT_TRUE(tfmdata::translateBatch(*model, sources, o, a).ok());
  ASSERT_TRUE(tfmdata::translateBatch(*model, sources, o, b).ok());
  EXPECT_EQ(a, b);
  o.beam = 1;
  ASSERT_TRUE(tfmdata::translateBatch(*model, sources, o, one).ok());
  for (size_t i = 0; i < sources.size(); ++i)
    EXPECT_EQ(one[i], greedyViaForward(*model, sources[i], int64_t(1.5 * sources[i].size()) + 10));
}

}  // namespace

namespace {

// Per-position teacher-forced log-probabilities of `out` then </s> via the forward entry.
std::vector<double> tokenLogProbsViaForward(tfmrt::Model &m, const std::vector<int32_t> &src,
                                            const std::vector<int32_t> &out) {
  std::vector<int32_t> srcIds = src, in{1};
  srcIds.push_back(2);
  in.insert(in.end(), out.begin(), out.end());
  std::vector<int32_t> targets = out;
  targets.push_back(2);
  const int64_t T = int64_t(in.size());
  std::vector<tfmrt::Tensor> res;
  EXPECT_TRUE(m.run("forward", {tfmrt::Tensor::i32({1, int64_t(srcIds.size())}, srcIds), tfmrt::Tensor::i32({1, T}, in),
                                tfmrt::Tensor::i32({1, T}, std::vector<int32_t>(size_t(T), 0))},
                    res)
                  .ok());
  const int64_t V = res[0].shape[2];
  std::vector<double> lp;
  for (int64_t t = 0; t < T; ++t) {
    const float *z = res[0].data<float>() + t * V;
    double mx = *std::max_element(z, z + V), sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(z[v]) - mx);
    lp.push_back(double(z[targets[size_t(t)]]) - mx - std::log(sum));
  }
  return lp;
}

// Teacher-forced log-probability of `out` (then </s> if `withEos`) via the forward entry.
double logProbViaForward(tfmrt::Model &m, const std::vector<int32_t> &src, const std::vector<int32_t> &out, bool withEos) {
  const std::vector<double> lp = tokenLogProbsViaForward(m, src, out);
  double total = 0;
  for (size_t t = 0; t < out.size() + (withEos ? 1 : 0); ++t) total += lp[t];
  return total;
}

// Log-softmax of row r of logits [R, 1, V].
std::vector<double> logSoftmaxRow(const tfmrt::Tensor &logits, int64_t r) {
  const int64_t V = logits.shape.back();
  const float *z = logits.data<float>() + r * V;
  double mx = *std::max_element(z, z + V), sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(double(z[v]) - mx);
  std::vector<double> out(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v) out[v] = double(z[v]) - mx - std::log(sum);
  return out;
}

// decode_step with the K/V cache against `decode` over the whole prefix, step by step, through
// beam-style reorders (rows swapping parents, one parent feeding two rows), compaction (a
// sentence leaving the batch) and continuous batching (a sentence entering two steps late, so
// rows sit at different positions): equal log-probabilities at every step.
TEST(CachedDecoding, StepLogProbsEqualFullPrefix) {
  for (const char *spec : {"tiny", "tiny-prenorm"})
    for (const char *fusion : {"all", "none"})
      for (auto backend : {tfmrt::KernelBackend::Dnnl, tfmrt::KernelBackend::Reference}) {
        SCOPED_TRACE(std::string(spec) + " fusion " + fusion + " " + tfmrt::backendName(backend));
        auto model = compileAndLoad(spec, backend, fusion, false, false, /*translate=*/true);
        ASSERT_TRUE(model);
        ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/" + spec + ".weights.safetensors").ok());
        const int64_t N = 3, S = 6, L = std::stoll(model->artifact().metadata.at("model.decoder_layers"));
        const std::vector<int32_t> src{5, 9, 13, 7, 21, 2, 30, 2, 0, 0, 0, 0, 11, 12, 13, 14, 2, 0};
        const tfmrt::Tensor srcT = tfmrt::Tensor::i32({N, S}, src);
        std::unique_ptr<tfmrt::Session> session;
        ASSERT_TRUE(tfmrt::Session::create(*model, session).ok());
        std::vector<tfmrt::Tensor> enc;
        ASSERT_TRUE(session->run("encode", {srcT}, enc).ok());
        ASSERT_EQ(enc.size(), size_t(1 + 2 * L));
        ASSERT_TRUE(session->bindStates({16, 22}).ok());
        // Per step: each row's sentence, parent row (previous step; a sentence's first row is
        // its own parent) and new token (BOS = 1 first).
        struct Step {
          std::vector<int32_t> sentence, parent, token;
        };
        std::vector<Step> steps{
            {{0, 1}, {0, 1}, {1, 1}},                                     // BOS, one row per sentence
            {{0, 0, 1, 1}, {0, 0, 1, 1}, {7, 8, 9, 10}},                  // beams open
            {{0, 0, 1, 1, 2}, {1, 0, 3, 3, 4}, {13, 14, 15, 16, 1}},      // swap; one parent twice; 2 enters
            {{0, 0, 2, 2}, {0, 1, 4, 4}, {19, 20, 21, 22}},               // sentence 1 leaves
            {{0, 2, 2}, {1, 3, 2}, {23, 24, 25}},
        };
        // Then random beams: 1-4 rows per sentence, parents drawn from the sentence's rows.
        uint32_t seed = 12345;
        auto next = [&](uint32_t n) { return ((seed = seed * 1664525u + 1013904223u) >> 8) % n; };
        for (int t = 5; t < 22; ++t) {
          const Step &prev = steps.back();
          Step st;
          for (int32_t n : {0, 2}) {  // sentence 1 has left
            std::vector<int32_t> mine;
            for (size_t r = 0; r < prev.sentence.size(); ++r)
              if (prev.sentence[r] == n) mine.push_back(int32_t(r));
            const uint32_t rowsHere = 1 + next(4);
            for (uint32_t k = 0; k < rowsHere; ++k) {
              st.sentence.push_back(n);
              st.parent.push_back(mine[next(uint32_t(mine.size()))]);
              st.token.push_back(int32_t(3 + next(40)));
            }
          }
          steps.push_back(st);
        }
        std::vector<std::vector<int32_t>> prefix;  // per row of the previous step: BOS + tokens
        for (size_t t = 0; t < steps.size(); ++t) {
          const Step &st = steps[t];
          const int64_t R = int64_t(st.sentence.size());
          std::vector<std::vector<int32_t>> cur(static_cast<size_t>(R));
          std::vector<int32_t> positions(static_cast<size_t>(R));
          for (int64_t r = 0; r < R; ++r) {
            const bool entering = st.token[r] == 1;
            cur[r] = entering ? std::vector<int32_t>{} : prefix[st.parent[r]];
            cur[r].push_back(st.token[r]);
            positions[r] = int32_t(cur[r].size()) - 1;
          }
          std::vector<tfmrt::Tensor> in{tfmrt::Tensor::i32({R, 1}, st.token), tfmrt::Tensor::i32({R}, positions),
                                        tfmrt::Tensor::i32({R}, st.parent), tfmrt::Tensor::i32({R}, st.sentence), srcT};
          for (int64_t l = 0; l < 2 * L; ++l) in.push_back(enc[1 + l]);
          std::vector<tfmrt::Tensor> cached;
          tfmrt::Status s = session->run("decode_step", in, cached);
          ASSERT_TRUE(s.ok()) << s.message();
          ASSERT_EQ(cached[0].numel(), R * cached[0].shape.back());
          // The reference: the decoder over each row's whole prefix, with its sentence's source
          // and memory row.
          const int64_t D = enc[0].shape[2];
          double worst = 0;
          for (int64_t r = 0; r < R; ++r) {
            const int64_t n = st.sentence[r], T = int64_t(cur[r].size());
            std::vector<tfmrt::Tensor> full;
            s = model->run("decode", {tfmrt::Tensor::i32({1, S}, std::vector<int32_t>(src.begin() + n * S, src.begin() + (n + 1) * S)),
                                      tfmrt::Tensor::f32({1, S, D}, std::vector<float>(enc[0].data<float>() + n * S * D,
                                                                                      enc[0].data<float>() + (n + 1) * S * D)),
                                      tfmrt::Tensor::i32({1, T}, cur[r])}, full);
            ASSERT_TRUE(s.ok()) << s.message();
            auto a = logSoftmaxRow(cached[0], r), b = logSoftmaxRow(full[0], 0);
            ASSERT_EQ(a.size(), b.size());
            for (size_t v = 0; v < a.size(); ++v) worst = std::max(worst, std::abs(a[v] - b[v]));
          }
          EXPECT_LT(worst, 1e-5) << "step " << t;
          prefix = std::move(cur);
        }
      }
}

// Session::run with a mask of wanted outputs (the full-prefix decoder asks `encode` for the
// memory only): the wanted results are unchanged, the others empty, fewer kernels run, and a
// node that writes state (decode_step's cache writes) runs even when no output is wanted.
TEST(SessionOutputs, WantedOnlyAndStateWritesKept) {
  auto compiled = compileAndLoad("tiny", tfmrt::KernelBackend::Dnnl, "all", false, false, /*translate=*/true);
  ASSERT_TRUE(compiled);
  tfmrt::RuntimeOptions options;
  options.profile = true;
  std::unique_ptr<tfmrt::Model> model;
  ASSERT_TRUE(tfmrt::Model::fromArtifact(compiled->artifact(), options, model).ok());
  ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/tiny.weights.safetensors").ok());
  auto kernelCalls = [&] {
    int64_t calls = 0;
    for (const auto &k : model->profile()) calls += k.calls;
    model->resetProfile();
    return calls;
  };
  const int64_t N = 2, S = 5, L = std::stoll(model->artifact().metadata.at("model.decoder_layers"));
  const tfmrt::Tensor src = tfmrt::Tensor::i32({N, S}, {5, 9, 13, 7, 2, 11, 12, 2, 0, 0});
  std::unique_ptr<tfmrt::Session> session;
  ASSERT_TRUE(tfmrt::Session::create(*model, session).ok());
  std::vector<tfmrt::Tensor> all, memoryOnly;
  model->resetProfile();
  ASSERT_TRUE(session->run("encode", {src}, all).ok());
  const int64_t allCalls = kernelCalls();
  std::vector<bool> wanted(size_t(1 + 2 * L), false);
  wanted[0] = true;
  ASSERT_TRUE(session->run("encode", {src}, memoryOnly, wanted).ok());
  const int64_t memoryCalls = kernelCalls();
  ASSERT_EQ(memoryOnly.size(), all.size());
  ASSERT_EQ(memoryOnly[0].shape, all[0].shape);
  EXPECT_EQ(std::memcmp(memoryOnly[0].rawData(), all[0].rawData(), all[0].nbytes()), 0);
  for (size_t o = 1; o < all.size(); ++o) {
    EXPECT_GT(all[o].numel(), 0);
    EXPECT_EQ(memoryOnly[o].numel(), 0) << "output " << o;
  }
  EXPECT_LT(memoryCalls, allCalls);  // the cross K/V projections were skipped
  tfmrt::Status bad = session->run("encode", {src}, memoryOnly, std::vector<bool>{true});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("flags"), std::string::npos) << bad.message();

  // Two steps of decode_step; the first with no output wanted in one session.
  auto step = [&](tfmrt::Session &sess, int32_t token, int32_t position, const std::vector<bool> *mask,
                  std::vector<tfmrt::Tensor> &out) {
    std::vector<tfmrt::Tensor> in{tfmrt::Tensor::i32({N, 1}, {token, token}), tfmrt::Tensor::i32({N}, {position, position}),
                                  tfmrt::Tensor::i32({N}, {0, 1}), tfmrt::Tensor::i32({N}, {0, 1}), src};
    for (int64_t l = 0; l < 2 * L; ++l) in.push_back(all[size_t(1 + l)]);
    return mask ? sess.run("decode_step", in, out, *mask) : sess.run("decode_step", in, out);
  };
  std::unique_ptr<tfmrt::Session> full, pruned, skipped;
  for (auto *sess : {&full, &pruned, &skipped}) {
    ASSERT_TRUE(tfmrt::Session::create(*model, *sess).ok());
    ASSERT_TRUE((*sess)->bindStates({N, 8}).ok());
  }
  std::vector<tfmrt::Tensor> a0, a1, b0, b1, c1;
  const std::vector<bool> none{false};
  ASSERT_TRUE(step(*full, 1, 0, nullptr, a0).ok());
  ASSERT_TRUE(step(*full, 7, 1, nullptr, a1).ok());
  ASSERT_TRUE(step(*pruned, 1, 0, &none, b0).ok());
  EXPECT_EQ(b0[0].numel(), 0);
  ASSERT_TRUE(step(*pruned, 7, 1, nullptr, b1).ok());
  ASSERT_TRUE(step(*skipped, 7, 1, nullptr, c1).ok());  // position 0 never written
  ASSERT_EQ(b1[0].shape, a1[0].shape);
  EXPECT_EQ(std::memcmp(b1[0].rawData(), a1[0].rawData(), a1[0].nbytes()), 0);
  EXPECT_NE(std::memcmp(c1[0].rawData(), a1[0].rawData(), a1[0].nbytes()), 0);  // step 1 reads step 0's K/V
}

// Golden tiny weights with the output row of </s> set to `factor` x the row of the token c that
// greedy emits most often on `sources` (tiny ties the output projection to the target embedding;
// the source side only sees </s> at its end): factor 0.999 makes </s> the runner-up wherever c
// wins, 1.001 makes it win there instead.
bool eosRowFromCommonest(tfmrt::Model &model, const std::vector<std::vector<int32_t>> &sources, float factor) {
  std::map<int32_t, int> counts;
  for (const auto &s : sources)
    for (int32_t t : greedyViaForward(model, s, int64_t(s.size()) + 6)) counts[t]++;
  if (counts.empty()) return false;
  int32_t c = std::max_element(counts.begin(), counts.end(), [](auto &a, auto &b) { return a.second < b.second; })->first;
  tfmrt::TensorMap w;
  if (!tfmrt::readSafetensors(kSource + "/tests/golden/tiny.weights.safetensors", w).ok()) return false;
  tfmrt::Tensor &table = w.at("shared_embedding.weight");
  const int64_t D = table.shape[1];
  for (int64_t j = 0; j < D; ++j) table.data<float>()[2 * D + j] = factor * table.data<float>()[c * D + j];
  return model.setWeights(w).ok();
}

// Weights that make </s> the runner-up wherever token c wins: the output row of </s> becomes
// 0.999 x the row of c (tiny ties the output projection to the target embedding; the source
// side only sees </s> at its end). Greedy must still be argmax.
TEST(CachedDecoding, GreedyIsArgmaxWhenEosRanksSecond) {
  auto model = compileAndLoad("tiny", tfmrt::KernelBackend::Dnnl, "all", false, false, true);
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/tiny.weights.safetensors").ok());
  const std::vector<std::vector<int32_t>> sources{{5, 9, 13, 7, 21}, {30}, {11, 12, 13, 14, 15, 16, 17, 18}, {4, 4},
                                                  {40, 41, 42}, {7, 7, 7, 7}};
  ASSERT_TRUE(eosRowFromCommonest(*model, sources, 0.999f));

  tfmdata::SearchOptions o;
  o.beam = 1;
  o.maxLengthRatio = 1.0;
  o.maxLengthOffset = 6;
  o.maxLen = 32;
  std::vector<std::vector<int32_t>> cachedOut, fullOut;
  ASSERT_TRUE(tfmdata::translateBatch(*model, sources, o, cachedOut).ok());
  o.useCache = false;
  ASSERT_TRUE(tfmdata::translateBatch(*model, sources, o, fullOut).ok());
  int eosSecond = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const auto expected = greedyViaForward(*model, sources[i], int64_t(sources[i].size()) + 6, &eosSecond);
    EXPECT_EQ(cachedOut[i], expected) << "sentence " << i;
    EXPECT_EQ(fullOut[i], expected) << "sentence " << i;
  }
  EXPECT_GE(eosSecond, 5) << "the weights must put </s> second often for this test to mean anything";
}

// A sentence stops once its N best (--n-best N) are final: N finished and no live hypothesis
// able to beat the N-th under the length penalty, not K finished. On weights where </s> often
// wins (so sentences finish early and unevenly), n-best 1..3 with beam 4 give the first N
// hypotheses of n-best 4 (tokens and scores) on both decoders, each N after fewer rows than N + 1
// (waiting for K finished fails that).
TEST(Search, SentencesStopOnceTheirNBestAreFinal) {
  auto model = compileAndLoad("tiny", tfmrt::KernelBackend::Dnnl, "all", false, false, true);
  ASSERT_TRUE(model);
  const std::vector<std::vector<int32_t>> sources{{5, 9, 13, 7, 21}, {30}, {11, 12, 13, 14, 15, 16, 17, 18}, {4, 4},
                                                  {40, 41, 42}, {7, 7, 7, 7}};
  ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/tiny.weights.safetensors").ok());
  ASSERT_TRUE(eosRowFromCommonest(*model, sources, 1.001f));
  for (bool cache : {true, false}) {
    SCOPED_TRACE(cache ? "cached" : "full prefix");
    std::vector<std::vector<tfmdata::Hypothesis>> all;
    int64_t rowsAll = 0, rowsPrevious = 0;
    for (int n : {4, 3, 2, 1}) {
      tfmdata::SearchOptions o;
      o.beam = 4;
      o.nBest = n;
      o.maxLen = 32;
      o.useCache = cache;
      std::unique_ptr<tfmdata::Translator> t;
      ASSERT_TRUE(tfmdata::Translator::create(*model, o, t).ok());
      std::vector<std::vector<tfmdata::Hypothesis>> h;
      ASSERT_TRUE(t->translate(sources, h).ok());
      ASSERT_EQ(h.size(), sources.size());
      if (n == 4) {
        all = h;
        rowsAll = t->work().rows;
        continue;
      }
      // Each smaller N stops sooner on these weights (with K finished required, n-best 2 and 1
      // decoded the same 250 rows; now 138 and 102, n-best 4 286).
      EXPECT_LT(t->work().rows, n == 3 ? rowsAll : rowsPrevious) << "n-best " << n;
      rowsPrevious = t->work().rows;
      for (size_t i = 0; i < sources.size(); ++i) {
        ASSERT_EQ(h[i].size(), std::min(size_t(n), all[i].size())) << "sentence " << i;
        for (size_t k = 0; k < h[i].size(); ++k) {
          EXPECT_EQ(h[i][k].tokens, all[i][k].tokens) << "n-best " << n << " sentence " << i << " rank " << k;
          EXPECT_EQ(h[i][k].score, all[i][k].score) << "n-best " << n << " sentence " << i << " rank " << k;
        }
      }
    }
  }
}

// Beam search: the cached and full-prefix decoders find the same hypotheses, and a beam's best
// hypothesis scores at least as well as greedy's (the search keeps greedy's path in the beam
// unless something better displaces it... not guaranteed in general, so checked on score only
// where both finished).
TEST(CachedDecoding, BeamSameWithAndWithoutCache) {
  for (const char *spec : {"tiny", "tiny-prenorm"}) {
    auto model = compileAndLoad(spec, tfmrt::KernelBackend::Dnnl, "all", false, false, true);
    ASSERT_TRUE(model);
    ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/" + spec + ".weights.safetensors").ok());
    const std::vector<std::vector<int32_t>> sources{{5, 9, 13, 7, 21}, {30}, {11, 12, 13, 14, 15, 16, 17, 18}, {4, 4}};
    for (int beam : {2, 4}) {
      tfmdata::SearchOptions o;
      o.beam = beam;
      o.nBest = beam;
      o.maxLen = 32;
      std::unique_ptr<tfmdata::Translator> cached, full;
      ASSERT_TRUE(tfmdata::Translator::create(*model, o, cached).ok());
      o.useCache = false;
      ASSERT_TRUE(tfmdata::Translator::create(*model, o, full).ok());
      std::vector<std::vector<tfmdata::Hypothesis>> a, b;
      { auto st = cached->translate(sources, a); ASSERT_TRUE(st.ok()) << st.message(); }
      ASSERT_TRUE(full->translate(sources, b).ok());
      // The same search, so the same rows; the full-prefix decoder computes every prefix again.
      EXPECT_EQ(cached->work().rows, full->work().rows);
      EXPECT_EQ(cached->work().decoderPositions, cached->work().rows);
      EXPECT_GT(full->work().decoderPositions, full->work().rows);
      EXPECT_GT(full->work().memoryPositions, 0);
      // Continuous batching (one or two sentences in flight, refilled as they finish) and the
      // full-prefix decoder a batch at a time, with the sources encoded all at once or in blocks
      // (budget 3: a sentence per block; 12: the 6- and 2-token sources together, so a group of
      // two in flight spans blocks): the same hypotheses and scores.
      for (int64_t blockTokens : {int64_t(4096), int64_t(3), int64_t(12)})
        for (int64_t inFlight : {0, 1, 2}) {
          for (bool cache : {true, false}) {
            o.useCache = cache;
            o.maxSentences = inFlight;
            o.encodeBlockTokens = blockTokens;
            std::unique_ptr<tfmdata::Translator> t;
            ASSERT_TRUE(tfmdata::Translator::create(*model, o, t).ok());
            std::vector<std::vector<tfmdata::Hypothesis>> c;
            ASSERT_TRUE(t->translate(sources, c).ok());
            ASSERT_EQ(c.size(), a.size());
            // Padded positions encoded: all four sources (6, 2, 9, 3 tokens with EOS) padded to
            // their block's longest.
            const int64_t encoded = blockTokens == 4096 ? 4 * 9 : blockTokens == 3 ? 6 + 2 + 9 + 3 : 2 * 6 + 9 + 3;
            EXPECT_EQ(t->work().encodedPositions, encoded) << "block " << blockTokens;
            for (size_t i = 0; i < a.size(); ++i) {
              ASSERT_EQ(c[i].size(), a[i].size());
              for (size_t k = 0; k < a[i].size(); ++k) {
                EXPECT_EQ(c[i][k].tokens, a[i][k].tokens)
                    << "in flight " << inFlight << " cache " << cache << " block " << blockTokens;
                EXPECT_NEAR(c[i][k].score, a[i][k].score, 1e-5);
              }
            }
          }
        }
      o.encodeBlockTokens = 0;
      std::unique_ptr<tfmdata::Translator> refused;
      EXPECT_FALSE(tfmdata::Translator::create(*model, o, refused).ok());
      for (size_t i = 0; i < sources.size(); ++i) {
        ASSERT_EQ(a[i].size(), b[i].size());
        ASSERT_FALSE(a[i].empty());
        for (size_t k = 0; k < a[i].size(); ++k) {
          EXPECT_EQ(a[i][k].tokens, b[i][k].tokens) << spec << " beam " << beam << " sentence " << i << " rank " << k
                                                    << " scores " << a[i][k].score << " " << b[i][k].score;
          EXPECT_NEAR(a[i][k].score, b[i][k].score, 1e-4);
          for (const auto *h : {&a[i][k], &b[i][k]}) {
            const double withEos = logProbViaForward(*model, sources[i], h->tokens, true),
                         without = logProbViaForward(*model, sources[i], h->tokens, false);
            EXPECT_TRUE(std::abs(h->logProb - withEos) < 1e-4 || std::abs(h->logProb - without) < 1e-4)
                << h->logProb << " vs forward " << withEos << " / " << without;
          }
          if (k > 0) EXPECT_GE(a[i][k - 1].score, a[i][k].score);
        }
      }
    }
  }
}

}  // namespace

namespace {

// Sessions of one model used from two threads at once (each its own Translator, one Session
// each) give what they give one after the other.
TEST(CachedDecoding, SessionsOnTwoThreads) {
  auto model = compileAndLoad("tiny-prenorm", tfmrt::KernelBackend::Dnnl, "all", false, false, true);
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/tiny-prenorm.weights.safetensors").ok());
  const std::vector<std::vector<int32_t>> a{{5, 9, 13, 7, 21}, {30}, {11, 12, 13}}, b{{4, 4}, {17, 18, 19, 20, 21, 22}};
  tfmdata::SearchOptions o;
  o.beam = 3;
  o.maxLen = 32;
  std::vector<std::vector<int32_t>> seqA, seqB, parA, parB;
  ASSERT_TRUE(tfmdata::translateBatch(*model, a, o, seqA).ok());
  ASSERT_TRUE(tfmdata::translateBatch(*model, b, o, seqB).ok());
  bool okA = false, okB = false;
  for (int round = 0; round < 5; ++round) {
    std::thread ta([&] { okA = tfmdata::translateBatch(*model, a, o, parA).ok(); });
    std::thread tb([&] { okB = tfmdata::translateBatch(*model, b, o, parB).ok(); });
    ta.join();
    tb.join();
    ASSERT_TRUE(okA && okB);
    EXPECT_EQ(parA, seqA);
    EXPECT_EQ(parB, seqB);
  }
}

// Translators sharing one call's sentences (Translator::share, tfmc translate --workers): three
// translators of one model on three threads, each claiming blocks of one or two sentences
// (encodeBlockTokens 8) into 2 slots, give every sentence the result one translator gives it,
// search and forced decoding alike, and finish each sentence exactly once.
TEST(Search, TranslatorsSharingSentencesGiveOneTranslatorsResults) {
  auto model = compileAndLoad("tiny", tfmrt::KernelBackend::Dnnl, "all", false, false, /*translate=*/true);
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/tiny.weights.safetensors").ok());
  std::vector<std::vector<int32_t>> sources, targets;
  for (int i = 0; i < 24; ++i) {
    sources.push_back({});
    for (int j = 0; j <= (i * 7) % 9; ++j) sources.back().push_back(3 + (i * 13 + j * 5) % 50);
    targets.push_back({});
    for (int j = 0; j < i % 6; ++j) targets.back().push_back(3 + (i + j * 11) % 50);
  }
  tfmdata::SearchOptions o;
  o.beam = 3;
  o.nBest = 2;
  o.maxSentences = 2;
  o.encodeBlockTokens = 8;
  for (bool scoring : {false, true}) {
    SCOPED_TRACE(scoring ? "score" : "translate");
    std::unique_ptr<tfmdata::Translator> one;
    ASSERT_TRUE(tfmdata::Translator::create(*model, o, one).ok());
    std::vector<std::vector<tfmdata::Hypothesis>> expected;
    ASSERT_TRUE((scoring ? one->score(sources, targets, expected) : one->translate(sources, expected)).ok());
    std::vector<std::unique_ptr<tfmdata::Translator>> workers(3);
    for (auto &w : workers) ASSERT_TRUE(tfmdata::Translator::create(*model, o, w).ok());
    tfmdata::Translator::SharedSentences queue;
    queue.translators = int64_t(workers.size());
    std::vector<std::vector<tfmdata::Hypothesis>> shared(sources.size());
    std::vector<size_t> claimed(workers.size(), 0);
    std::vector<tfmrt::Status> status(workers.size());
    std::vector<std::thread> threads;
    for (size_t w = 0; w < workers.size(); ++w)
      threads.emplace_back([&, w] {
        workers[w]->share(&queue);
        status[w] = scoring ? workers[w]->score(sources, targets, shared, nullptr, [&, w](size_t n) { claimed[w] = n; })
                            : workers[w]->translate(sources, shared, nullptr, [&, w](size_t n) { claimed[w] = n; });
        workers[w]->share(nullptr);
      });
    for (auto &t : threads) t.join();
    size_t total = 0;
    for (size_t w = 0; w < workers.size(); ++w) {
      ASSERT_TRUE(status[w].ok()) << status[w].message();
      total += claimed[w];
    }
    EXPECT_EQ(total, sources.size());  // every sentence finished once
    for (size_t i = 0; i < sources.size(); ++i) {
      ASSERT_EQ(shared[i].size(), expected[i].size()) << "sentence " << i;
      for (size_t k = 0; k < expected[i].size(); ++k) {
        EXPECT_EQ(shared[i][k].tokens, expected[i][k].tokens) << "sentence " << i;
        EXPECT_NEAR(shared[i][k].logProb, expected[i][k].logProb, 1e-5) << "sentence " << i;
      }
    }
  }
  // A shared call needs its results sized to the sentences.
  std::unique_ptr<tfmdata::Translator> t;
  ASSERT_TRUE(tfmdata::Translator::create(*model, o, t).ok());
  tfmdata::Translator::SharedSentences queue;
  std::vector<std::vector<tfmdata::Hypothesis>> unsized;
  t->share(&queue);
  EXPECT_FALSE(t->translate(sources, unsized).ok());
}

// A shared queue hands out shrinking claims: a (2 x translators)-th of the sentences left (at
// least one), so no translator takes the last full block while the others run dry. One
// translator on a queue declared for two, 40 sources, an encode budget that fits them all: 14
// claims (10, 7, 5, 4, 3, 2, 2, then seven of one) instead of one, and the same results.
TEST(Search, SharedQueueClaimsShrinkAsItEmpties) {
  auto model = compileAndLoad("tiny", tfmrt::KernelBackend::Dnnl, "all", false, false, /*translate=*/true);
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/tiny.weights.safetensors").ok());
  std::vector<std::vector<int32_t>> sources;
  for (int i = 0; i < 40; ++i) sources.push_back({3 + i % 50, 4 + (i * 7) % 40, 5 + (i * 3) % 30});
  tfmdata::SearchOptions o;
  o.beam = 2;
  o.maxSentences = 64;
  o.encodeBlockTokens = 4096;
  std::unique_ptr<tfmdata::Translator> alone, sharing;
  ASSERT_TRUE(tfmdata::Translator::create(*model, o, alone).ok());
  ASSERT_TRUE(tfmdata::Translator::create(*model, o, sharing).ok());
  std::vector<std::vector<tfmdata::Hypothesis>> expected, got(sources.size());
  ASSERT_TRUE(alone->translate(sources, expected).ok());
  EXPECT_EQ(alone->work().encodeCalls, 1);
  tfmdata::Translator::SharedSentences queue;
  queue.translators = 2;
  sharing->share(&queue);
  ASSERT_TRUE(sharing->translate(sources, got).ok());
  sharing->share(nullptr);
  EXPECT_EQ(sharing->work().encodeCalls, 14);
  EXPECT_EQ(sharing->work().encodedPositions, alone->work().encodedPositions);  // 40 x 4, either way
  EXPECT_EQ(queue.next, 40);
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSERT_EQ(got[i].size(), expected[i].size()) << "sentence " << i;
    for (size_t k = 0; k < expected[i].size(); ++k) {
      EXPECT_EQ(got[i][k].tokens, expected[i][k].tokens) << "sentence " << i;
      EXPECT_NEAR(got[i][k].logProb, expected[i][k].logProb, 1e-5) << "sentence " << i;
    }
  }
}

// --min-length and --no-repeat-ngram-size: greedy (cached and full prefix) equals the
// constrained argmax over `forward`; beam 4 gives the same on both decoders and its outputs keep
// the constraints. Not vacuous: unconstrained, these weights repeat bigrams and end some outputs
// before the minimum.
TEST(Search, MinLengthAndNoRepeatNgramMatchAConstrainedOracle) {
  auto model = compileAndLoad("tiny", tfmrt::KernelBackend::Dnnl, "all", false, false, /*translate=*/true);
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/tiny.weights.safetensors").ok());
  const std::vector<std::vector<int32_t>> sources{{5, 9, 13, 7, 21}, {30}, {11, 12, 13, 14, 15, 16, 17, 18}, {4, 4},
                                                  {40, 41, 42}, {7, 7, 7, 7}, {50, 3, 50, 3, 50}};
  // </s> wins wherever the commonest token did: outputs end early, so the minimum length bites.
  ASSERT_TRUE(eosRowFromCommonest(*model, sources, 1.001f));
  constexpr int64_t kOffset = 8, kMin = 5;
  constexpr int kNgram = 2;
  int repeated = 0, short_ = 0;
  for (const auto &src : sources) {
    const auto plain = greedyViaForward(*model, src, int64_t(src.size()) + kOffset);
    for (size_t i = 0; i < plain.size(); ++i) repeated += i > 0 && repeatsNgram({plain.begin(), plain.begin() + long(i)}, plain[i], kNgram);
    short_ += int64_t(plain.size()) < kMin;
  }
  ASSERT_GT(repeated, 0) << "the unconstrained outputs must repeat a bigram for this test to mean anything";
  ASSERT_GT(short_, 0) << "some unconstrained output must be shorter than the minimum";

  tfmdata::SearchOptions o;
  o.beam = 1;
  o.maxLengthRatio = 1.0;
  o.maxLengthOffset = kOffset;
  o.maxLen = 32;
  o.minLength = kMin;
  o.noRepeatNgram = kNgram;
  std::vector<std::vector<int32_t>> cached, full;
  ASSERT_TRUE(tfmdata::translateBatch(*model, sources, o, cached).ok());
  o.useCache = false;
  ASSERT_TRUE(tfmdata::translateBatch(*model, sources, o, full).ok());
  for (size_t i = 0; i < sources.size(); ++i) {
    const auto expected = greedyViaForward(*model, sources[i], int64_t(sources[i].size()) + kOffset, nullptr, kMin, kNgram);
    EXPECT_EQ(cached[i], expected) << "sentence " << i;
    EXPECT_EQ(full[i], expected) << "sentence " << i;
  }

  o.beam = 4;
  o.nBest = 4;
  std::vector<std::vector<std::vector<tfmdata::Hypothesis>>> hyps(2);
  for (int useCache = 0; useCache < 2; ++useCache) {
    o.useCache = useCache == 1;
    std::unique_ptr<tfmdata::Translator> t;
    ASSERT_TRUE(tfmdata::Translator::create(*model, o, t).ok());
    ASSERT_TRUE(t->translate(sources, hyps[size_t(useCache)]).ok());
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSERT_EQ(hyps[0][i].size(), hyps[1][i].size()) << "sentence " << i;
    for (size_t h = 0; h < hyps[0][i].size(); ++h) {
      const auto &y = hyps[1][i][h].tokens;
      EXPECT_EQ(y, hyps[0][i][h].tokens) << "sentence " << i << " hypothesis " << h;
      EXPECT_NEAR(hyps[1][i][h].score, hyps[0][i][h].score, 1e-4) << "sentence " << i << " hypothesis " << h;
      EXPECT_GE(int64_t(y.size()), kMin) << "sentence " << i << " hypothesis " << h;
      for (size_t k = 1; k < y.size(); ++k)
        EXPECT_FALSE(repeatsNgram({y.begin(), y.begin() + long(k)}, y[k], kNgram)) << "sentence " << i << " hypothesis " << h;
    }
  }
  // Out-of-range constraints are refused when the translator is made.
  std::unique_ptr<tfmdata::Translator> t;
  o.minLength = -1;
  EXPECT_FALSE(tfmdata::Translator::create(*model, o, t).ok());
  o.minLength = 0;
  o.noRepeatNgram = 33;
  EXPECT_FALSE(tfmdata::Translator::create(*model, o, t).ok());
}

}  // namespace

namespace {

// Forced decoding (Translator::score) against the teacher-forced log-probability from `forward`
// (logProbViaForward, written independently of the search), with and without the K/V cache, on
// targets of 0-20 tokens whose sentences finish at different steps (continuous batching: 2 slots
// for 5 sentences); then the refusals.
TEST(Search, ScoreEqualsTeacherForcedForward) {
  for (const char *spec : {"tiny", "tiny-prenorm"}) {
    SCOPED_TRACE(spec);
    auto model = compileAndLoad(spec, tfmrt::KernelBackend::Dnnl, "all", false, false, /*translate=*/true);
    ASSERT_TRUE(model);
    ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/" + spec + ".weights.safetensors").ok());
    const std::vector<std::vector<int32_t>> sources{{5, 9, 13, 7, 21}, {30}, {11, 12, 13, 14, 15, 16, 17, 18}, {4, 4}, {40, 41}};
    std::vector<std::vector<int32_t>> targets{{7, 8, 9}, {}, {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22},
                                              {46}, {33, 33, 33, 33}};
    for (bool cache : {true, false}) {
      SCOPED_TRACE(cache ? "cached" : "full prefix");
      tfmdata::SearchOptions o;
      o.beam = 4;  // score ignores the search's options
      o.nBest = 2;
      o.minLength = 30;
      o.maxLen = 64;
      o.useCache = cache;
      o.maxSentences = 2;
      std::unique_ptr<tfmdata::Translator> t;
      ASSERT_TRUE(tfmdata::Translator::create(*model, o, t).ok());
      std::vector<std::vector<tfmdata::Hypothesis>> out;
      const tfmrt::Status s = t->score(sources, targets, out);
      ASSERT_TRUE(s.ok()) << s.message();
      ASSERT_EQ(out.size(), sources.size());
      for (size_t i = 0; i < sources.size(); ++i) {
        ASSERT_EQ(out[i].size(), 1u);
        EXPECT_EQ(out[i][0].tokens, targets[i]);
        const double expected = logProbViaForward(*model, sources[i], targets[i], true);
        EXPECT_NEAR(out[i][0].logProb, expected, 1e-4 * (1 + std::abs(expected))) << "sentence " << i;
        EXPECT_LT(out[i][0].logProb, 0.0);
      }
      // Refused: a target longer than max_len - 2, special ids, ids past the vocabulary, and
      // fewer targets than sources.
      auto refuse = [&](std::vector<std::vector<int32_t>> tg, const std::string &what) {
        const tfmrt::Status r = t->score(sources, tg, out);
        EXPECT_FALSE(r.ok()) << what;
        EXPECT_NE(r.message().find(what), std::string::npos) << r.message();
      };
      auto with = [&](std::vector<int32_t> row) {
        auto tg = targets;
        tg[3] = std::move(row);
        return tg;
      };
      refuse(with(std::vector<int32_t>(63, 5)), "target 4 has 63 tokens");
      refuse(with({5, 1, 6}), "target 4 holds id 1");
      refuse(with({5, 2}), "target 4 holds id 2");
      const std::string V = model->artifact().metadata.at("model.tgt_vocab_size");
      refuse(with({int32_t(std::stoi(V))}), "outside the target vocabulary of " + V);
      refuse(std::vector<std::vector<int32_t>>(targets.begin(), targets.end() - 1), "5 sources but 4 targets");
      // With sentence ids (the CLI's line numbers), errors name the target by its id + 1.
      const std::vector<uint64_t> ids{10, 11, 12, 13, 14};
      const tfmrt::Status named = t->score(sources, with({5, 1}), out, &ids);
      EXPECT_NE(named.message().find("target 14 holds id 1"), std::string::npos) << named.message();
      // Still usable after a refusal.
      ASSERT_TRUE(t->score(sources, targets, out).ok());
      EXPECT_NEAR(out[0][0].logProb, logProbViaForward(*model, sources[0], targets[0], true), 1e-4 * (1 + std::abs(out[0][0].logProb)));
    }
  }
}

}  // namespace

namespace {

// Target prefixes (Translator::translateWithPrefixes): greedy equals the argmax over `forward`
// continuing after the prefix; with beam 4, every output starts with its prefix, the cached and
// full-prefix decoders agree, and each hypothesis' log-probability (prefix included) equals the
// teacher-forced one. Prefixes of 0-6 tokens, one longer than the source's length limit (the limit
// grows to fit it), over 2 slots.
TEST(Search, TargetPrefixesAreForcedThenSearched) {
  auto model = compileAndLoad("tiny", tfmrt::KernelBackend::Dnnl, "all", false, false, /*translate=*/true);
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/tiny.weights.safetensors").ok());
  const std::vector<std::vector<int32_t>> sources{{5, 9, 13, 7, 21}, {30}, {11, 12, 13, 14, 15, 16, 17, 18}, {4, 4}};
  const std::vector<std::vector<int32_t>> prefixes{{7, 8}, {40, 41, 42, 43, 44, 45}, {}, {9}};
  tfmdata::SearchOptions o;
  o.maxLen = 32;
  o.maxLengthRatio = 1.0;
  o.maxLengthOffset = 3;  // sentence 1: 1 + 3 = 4 tokens, and its prefix alone has 6
  o.maxSentences = 2;
  o.nBest = 4;
  std::vector<std::vector<std::vector<tfmdata::Hypothesis>>> beams;
  for (int beam : {1, 4})
    for (bool cache : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "beam " << beam << (cache ? ", cached" : ", full prefix"));
      o.beam = beam;
      o.nBest = beam;
      o.useCache = cache;
      std::unique_ptr<tfmdata::Translator> t;
      ASSERT_TRUE(tfmdata::Translator::create(*model, o, t).ok());
      std::vector<std::vector<tfmdata::Hypothesis>> out;
      const tfmrt::Status s = t->translateWithPrefixes(sources, prefixes, out);
      ASSERT_TRUE(s.ok()) << s.message();
      ASSERT_EQ(out.size(), sources.size());
      for (size_t i = 0; i < sources.size(); ++i) {
        ASSERT_FALSE(out[i].empty());
        const int64_t maxOut = std::max<int64_t>(int64_t(sources[i].size()) + 3, int64_t(prefixes[i].size()) + 1);
        for (const tfmdata::Hypothesis &h : out[i]) {
          ASSERT_GE(h.tokens.size(), prefixes[i].size());
          EXPECT_TRUE(std::equal(prefixes[i].begin(), prefixes[i].end(), h.tokens.begin())) << "sentence " << i;
          EXPECT_LE(int64_t(h.tokens.size()), maxOut);
          // Cut at the limit: no </s> was scored.
          const bool cut = int64_t(h.tokens.size()) == maxOut;
          const double expected = logProbViaForward(*model, sources[i], h.tokens, !cut);
          EXPECT_NEAR(h.logProb, expected, 1e-4 * (1 + std::abs(expected))) << "sentence " << i;
        }
        if (beam == 1)
          EXPECT_EQ(out[i][0].tokens, greedyViaForward(*model, sources[i], maxOut, nullptr, 0, 0, prefixes[i]))
              << "sentence " << i;
      }
      beams.push_back(std::move(out));
    }
  // Cached and full prefix give the same hypotheses (beam 1, then beam 4).
  for (size_t b : {size_t(0), size_t(2)})
    for (size_t i = 0; i < sources.size(); ++i) {
      ASSERT_EQ(beams[b][i].size(), beams[b + 1][i].size());
      for (size_t h = 0; h < beams[b][i].size(); ++h) EXPECT_EQ(beams[b][i][h].tokens, beams[b + 1][i][h].tokens);
    }
  // Beam 4 is not greedy here: the prefix leaves room for a search.
  size_t differ = 0;
  for (size_t i = 0; i < sources.size(); ++i) differ += beams[0][i][0].tokens != beams[2][i][0].tokens || beams[2][i].size() > 1;
  EXPECT_GT(differ, 0u);
  // Refused: a prefix holding </s>, a prefix too long, a prefix count that does not match.
  std::unique_ptr<tfmdata::Translator> t;
  ASSERT_TRUE(tfmdata::Translator::create(*model, o, t).ok());
  std::vector<std::vector<tfmdata::Hypothesis>> out;
  auto bad = prefixes;
  bad[2] = {5, 2};
  EXPECT_NE(t->translateWithPrefixes(sources, bad, out).message().find("prefix 3 holds id 2"), std::string::npos);
  bad[2] = std::vector<int32_t>(31, 5);  // max_len 32 leaves 30
  EXPECT_NE(t->translateWithPrefixes(sources, bad, out).message().find("prefix 3 has 31 tokens"), std::string::npos);
  bad.pop_back();
  EXPECT_NE(t->translateWithPrefixes(sources, bad, out).message().find("4 sources but 3 prefixes"), std::string::npos);
}

}  // namespace

namespace {

// log sum_i w_i p_i(. | prefix) over the models' `forward` entries (double), one entry per token.
std::vector<double> mixtureViaForward(const std::vector<tfmrt::Model *> &models, const std::vector<double> &weights,
                                      const std::vector<int32_t> &src, const std::vector<int32_t> &prefix) {
  std::vector<int32_t> srcIds = src, in{1};
  srcIds.push_back(2);
  in.insert(in.end(), prefix.begin(), prefix.end());
  const int64_t T = int64_t(in.size());
  std::vector<double> mix;
  for (size_t i = 0; i < models.size(); ++i) {
    std::vector<tfmrt::Tensor> res;
    EXPECT_TRUE(models[i]
                    ->run("forward",
                          {tfmrt::Tensor::i32({1, int64_t(srcIds.size())}, srcIds), tfmrt::Tensor::i32({1, T}, in),
                           tfmrt::Tensor::i32({1, T}, std::vector<int32_t>(size_t(T), 0))},
                          res)
                    .ok());
    const int64_t V = res[0].shape[2];
    const float *z = res[0].data<float>() + (T - 1) * V;
    const double mx = *std::max_element(z, z + V);
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(z[v]) - mx);
    if (mix.empty()) mix.assign(size_t(V), 0.0);
    for (int64_t v = 0; v < V; ++v) mix[size_t(v)] += weights[i] * std::exp(double(z[v]) - mx - std::log(sum));
  }
  for (double &p : mix) p = std::log(p);
  return mix;
}

// An ensemble (Translator::create over several models) searches the mixture of its models'
// distributions: with two different models (the golden tiny weights and a seeded
// initialisation) and weights 0.3 / 0.7, greedy equals the argmax of the mixture computed from
// each model's `forward`, and every output's log-probability equals the teacher-forced mixture's;
// cached and full-prefix ensembles find the same beam-4 outputs. An ensemble of one model, or of
// one model twice, is that model bit for bit. Bad weights and vocabularies that differ are refused.
TEST(Search, EnsembleIsTheMixtureOfItsModels) {
  auto a = compileAndLoad("tiny", tfmrt::KernelBackend::Dnnl, "all", false, false, true);
  auto b = compileAndLoad("tiny", tfmrt::KernelBackend::Dnnl, "all", false, false, true);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->loadWeights(kSource + "/tests/golden/tiny.weights.safetensors").ok());
  ASSERT_TRUE(b->initWeights(7).ok());
  const std::vector<std::vector<int32_t>> sources{{5, 9, 13, 7, 21}, {30}, {11, 12, 13, 14, 15, 16, 17, 18}, {4, 4}, {40, 41}};
  const std::vector<double> weights{0.3, 0.7};
  tfmdata::SearchOptions o;
  o.maxLen = 64;
  o.maxSentences = 2;  // slots refilled: sentences enter while others decode

  // Greedy: the mixture's argmax, step by step; log-probabilities: the mixture's, teacher-forced.
  o.beam = 1;
  std::unique_ptr<tfmdata::Translator> t;
  ASSERT_TRUE(tfmdata::Translator::create({a.get(), b.get()}, {3.0, 7.0}, o, t).ok());  // normalised to 0.3 / 0.7
  std::vector<std::vector<tfmdata::Hypothesis>> greedy;
  ASSERT_TRUE(t->translate(sources, greedy).ok());
  size_t generated = 0, differsFromA = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    SCOPED_TRACE("sentence " + std::to_string(i));
    const int64_t maxOut = int64_t(1.5 * double(sources[i].size())) + 10;
    std::vector<int32_t> expected;
    double logProb = 0;
    for (int64_t step = 0; step < maxOut; ++step) {
      const std::vector<double> mix = mixtureViaForward({a.get(), b.get()}, weights, sources[i], expected);
      int32_t best = 2;
      for (int32_t v = 2; v < int32_t(mix.size()); ++v)
        if (mix[size_t(v)] > mix[size_t(best)]) best = v;
      logProb += mix[size_t(best)];
      if (best == 2) break;
      expected.push_back(best);
    }
    ASSERT_EQ(greedy[i].size(), 1u);
    EXPECT_EQ(greedy[i][0].tokens, expected);
    EXPECT_NEAR(greedy[i][0].logProb, logProb, 1e-4 * (1 + std::abs(logProb)));
    generated += expected.size();
    differsFromA += expected != greedyViaForward(*a, sources[i], maxOut);
  }
  EXPECT_GT(generated, 10u) << "the comparison needs outputs that are not all empty";
  EXPECT_GT(differsFromA, 0u) << "the second model should change some output, or the test shows nothing";

  // Beam 4: the cached and full-prefix ensembles agree; n-best log-probabilities are the mixture's.
  o.beam = 4;
  o.nBest = 2;
  std::vector<std::vector<tfmdata::Hypothesis>> beams[2];
  for (bool cache : {true, false}) {
    o.useCache = cache;
    ASSERT_TRUE(tfmdata::Translator::create({a.get(), b.get()}, weights, o, t).ok());
    ASSERT_TRUE(t->translate(sources, beams[cache]).ok());
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSERT_EQ(beams[0][i].size(), beams[1][i].size());
    for (size_t k = 0; k < beams[1][i].size(); ++k) {
      const tfmdata::Hypothesis &h = beams[1][i][k];
      EXPECT_EQ(h.tokens, beams[0][i][k].tokens) << "sentence " << i << " hypothesis " << k;
      EXPECT_NEAR(h.logProb, beams[0][i][k].logProb, 1e-4 * (1 + std::abs(h.logProb)));
      double forced = 0;
      std::vector<int32_t> prefix;
      for (size_t s = 0; s <= h.tokens.size(); ++s) {
        const int32_t token = s < h.tokens.size() ? h.tokens[s] : 2;
        forced += mixtureViaForward({a.get(), b.get()}, weights, sources[i], prefix)[size_t(token)];
        prefix.push_back(token);
      }
      // Outputs cut at the length limit have no </s>: only those that ended in it are compared.
      if (int64_t(h.tokens.size()) < int64_t(1.5 * double(sources[i].size())) + 10)
        EXPECT_NEAR(h.logProb, forced, 1e-4 * (1 + std::abs(forced))) << "sentence " << i << " hypothesis " << k;
    }
  }

  // One model, or the same model twice: its own outputs and log-probabilities, bit for bit.
  o.useCache = true;
  std::vector<std::vector<tfmdata::Hypothesis>> single, once, twice;
  ASSERT_TRUE(tfmdata::Translator::create(*a, o, t).ok());
  ASSERT_TRUE(t->translate(sources, single).ok());
  ASSERT_TRUE(tfmdata::Translator::create({a.get()}, {5.0}, o, t).ok());
  ASSERT_TRUE(t->translate(sources, once).ok());
  ASSERT_TRUE(tfmdata::Translator::create({a.get(), a.get()}, {}, o, t).ok());
  ASSERT_TRUE(t->translate(sources, twice).ok());
  for (size_t i = 0; i < sources.size(); ++i)
    for (size_t k = 0; k < single[i].size(); ++k) {
      EXPECT_EQ(once[i][k].tokens, single[i][k].tokens);
      EXPECT_EQ(once[i][k].logProb, single[i][k].logProb);
      EXPECT_EQ(twice[i][k].tokens, single[i][k].tokens);
      EXPECT_EQ(twice[i][k].logProb, single[i][k].logProb);
    }

  // Refused: a weight per model is needed, each positive and finite; the target vocabularies
  // must agree (tiny-prenorm has 47 target tokens, tiny 61).
  auto refuse = [&](const std::vector<tfmrt::Model *> &models, const std::vector<double> &w, const std::string &what) {
    tfmrt::Status s = tfmdata::Translator::create(models, w, o, t);
    if (s.ok()) s = t->translate(sources, once);
    EXPECT_FALSE(s.ok()) << what;
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  };
  refuse({a.get(), b.get()}, {1.0}, "1 ensemble weights for 2 models");
  refuse({a.get(), b.get()}, {1.0, 0.0}, "ensemble weight 2 must be positive");
  refuse({a.get(), b.get()}, {1.0, -2.0}, "ensemble weight 2 must be positive");
  refuse({a.get(), b.get()}, {NAN, 1.0}, "ensemble weight 1 must be positive");
  refuse({}, {}, "at least one model");
  auto prenorm = compileAndLoad("tiny-prenorm", tfmrt::KernelBackend::Dnnl, "all", false, false, true);
  ASSERT_TRUE(prenorm && prenorm->loadWeights(kSource + "/tests/golden/tiny-prenorm.weights.safetensors").ok());
  refuse({a.get(), prenorm.get()}, {}, "member 1 scores 61 tokens, member 2 47");
}

}  // namespace

namespace {

// Word scores (Hypothesis::tokenLogProbs, --word-scores): one per output token, then </s>'s when
// the output ended in it; each equals the teacher-forced log-probability of that position from
// `forward`, and they sum to the hypothesis' logProb. Greedy and beam 4 (cached and full
// prefix, n-best 3, outputs cut at a short length limit included) and forced scoring.
TEST(Search, WordScoresAreEachPositionsLogProb) {
  auto model = compileAndLoad("tiny", tfmrt::KernelBackend::Dnnl, "all", false, false, true);
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/tiny.weights.safetensors").ok());
  const std::vector<std::vector<int32_t>> sources{{5, 9, 13, 7, 21}, {30}, {11, 12, 13, 14, 15, 16, 17, 18}, {4, 4}};
  size_t checked = 0, cut = 0, ended = 0;
  auto check = [&](const tfmdata::Hypothesis &h, const std::vector<int32_t> &src, bool eos) {
    ASSERT_EQ(h.tokenLogProbs.size(), h.tokens.size() + (eos ? 1 : 0));
    const std::vector<double> want = tokenLogProbsViaForward(*model, src, h.tokens);
    double sum = 0;
    for (size_t t = 0; t < h.tokenLogProbs.size(); ++t) {
      EXPECT_NEAR(h.tokenLogProbs[t], want[t], 1e-4 * (1 + std::abs(want[t]))) << "position " << t;
      EXPECT_LE(h.tokenLogProbs[t], 0.0);
      sum += h.tokenLogProbs[t];
    }
    EXPECT_NEAR(sum, h.logProb, 1e-9 * (1 + std::abs(h.logProb)));
    ++checked;
    (eos ? ended : cut) += 1;
  };
  // The golden weights rarely emit </s>; with its output row at 1.001 x the commonest token's, it
  // wins wherever that token would (eosRowFromCommonest), so many outputs end in it.
  for (bool provoked : {false, true})
  for (int beam : {1, 4})
    for (bool cache : {true, false})
      for (int64_t offset : {10, 1}) {  // offset 1: most outputs cut at the limit (ratio 0.5)
        if (provoked && beam == 1 && cache && offset == 10) ASSERT_TRUE(eosRowFromCommonest(*model, sources, 1.001f));
        SCOPED_TRACE(std::string(provoked ? "</s> provoked, " : "") + "beam " + std::to_string(beam) +
                     (cache ? " cached" : " full prefix") + " offset " + std::to_string(offset));
        tfmdata::SearchOptions o;
        o.beam = beam;
        o.nBest = beam > 1 ? 3 : 1;
        o.maxLen = 64;
        o.useCache = cache;
        o.maxLengthRatio = offset == 1 ? 0.5 : 1.5;
        o.maxLengthOffset = offset;
        std::unique_ptr<tfmdata::Translator> t;
        ASSERT_TRUE(tfmdata::Translator::create(*model, o, t).ok());
        std::vector<std::vector<tfmdata::Hypothesis>> out;
        ASSERT_TRUE(t->translate(sources, out).ok());
        for (size_t i = 0; i < sources.size(); ++i) {
          const int64_t maxOut = int64_t(o.maxLengthRatio * double(sources[i].size())) + offset;
          for (const tfmdata::Hypothesis &h : out[i])
            check(h, sources[i], int64_t(h.tokens.size()) < maxOut);
        }
      }
  // Forced scoring: every target position and </s>.
  tfmdata::SearchOptions o;
  o.maxLen = 64;
  std::unique_ptr<tfmdata::Translator> t;
  ASSERT_TRUE(tfmdata::Translator::create(*model, o, t).ok());
  const std::vector<std::vector<int32_t>> targets{{7, 8, 9}, {}, {3, 4, 5, 6}, {46}};
  std::vector<std::vector<tfmdata::Hypothesis>> scored;
  ASSERT_TRUE(t->score(sources, targets, scored).ok());
  for (size_t i = 0; i < sources.size(); ++i) check(scored[i][0], sources[i], true);
  EXPECT_GT(cut, 20u);
  EXPECT_GT(ended, 20u);
}

}  // namespace

namespace {

// Sampling with beam K: K samples per sentence, each a real path (its log-probability equals the
// teacher-forced one and its word scores sum to it), the beam-1 sample (same seed) among them,
// the same samples with the cache and without, at another batch size, and not all alike.
TEST(Search, SamplingWithBeamDrawsIndependentSamples) {
  auto model = compileAndLoad("tiny", tfmrt::KernelBackend::Dnnl, "all", false, false, true);
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/tiny.weights.safetensors").ok());
  const std::vector<std::vector<int32_t>> sources{{5, 9, 13, 7, 21}, {30}, {11, 12, 13, 14, 15, 16, 17, 18}, {4, 4}};
  ASSERT_TRUE(eosRowFromCommonest(*model, sources, 1.001f));  // outputs that end before the limit too
  tfmdata::SearchOptions o;
  o.sample = true;
  o.seed = 11;
  o.maxLen = 64;
  o.beam = 1;
  std::unique_ptr<tfmdata::Translator> t;
  std::vector<std::vector<tfmdata::Hypothesis>> one, many[3];
  ASSERT_TRUE(tfmdata::Translator::create(*model, o, t).ok());
  ASSERT_TRUE(t->translate(sources, one).ok());
  o.beam = 4;
  o.nBest = 4;
  for (int variant = 0; variant < 3; ++variant) {
    o.useCache = variant != 1;
    o.maxSentences = variant == 2 ? 1 : 0;
    ASSERT_TRUE(tfmdata::Translator::create(*model, o, t).ok());
    ASSERT_TRUE(t->translate(sources, many[variant]).ok());
  }
  size_t varied = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    SCOPED_TRACE("sentence " + std::to_string(i));
    ASSERT_EQ(many[0][i].size(), 4u);
    bool hasBeamOne = false;
    std::set<std::vector<int32_t>> distinct;
    for (size_t k = 0; k < 4; ++k) {
      const tfmdata::Hypothesis &h = many[0][i][k];
      for (int variant : {1, 2}) {
        EXPECT_EQ(many[variant][i][k].tokens, h.tokens) << "variant " << variant;
        EXPECT_NEAR(many[variant][i][k].logProb, h.logProb, 1e-4 * (1 + std::abs(h.logProb)));
      }
      if (k > 0) EXPECT_GE(many[0][i][k - 1].score, h.score) << "best score first";
      const int64_t maxOut = int64_t(1.5 * double(sources[i].size())) + 10;
      const bool eos = int64_t(h.tokens.size()) < maxOut;
      const double forced = logProbViaForward(*model, sources[i], h.tokens, eos);
      EXPECT_NEAR(h.logProb, forced, 1e-4 * (1 + std::abs(forced)));
      hasBeamOne |= h.tokens == one[i][0].tokens;
      distinct.insert(h.tokens);
    }
    EXPECT_TRUE(hasBeamOne) << "sample 0 is the beam-1 sample";
    varied += distinct.size() > 1;
  }
  EXPECT_GE(varied, 2u) << "independent samples should differ somewhere";
}

}  // namespace

namespace {

// Word alignment (SearchOptions::alignment; decode_step compiled with --entries=...,translate,alignment).
std::unique_ptr<tfmrt::Model> alignmentModel(const std::string &spec, int layer = -1) {
  tfmc::ModelSpec parsed;
  if (!tfmc::test::parseSpec(spec, parsed)) return nullptr;
  tfmc::PipelineOptions pipeline;
  pipeline.translate = true;
  pipeline.alignment = true;
  pipeline.alignmentLayer = layer;
  auto model = compileAndLoad(parsed, tfmrt::KernelBackend::Dnnl, pipeline);
  if (model) EXPECT_TRUE(model->loadWeights(kSource + "/tests/golden/" + spec + ".weights.safetensors").ok());
  return model;
}

// Forced decoding's alignment equals the reference model's last-layer cross-attention weights,
// averaged over heads (tests/reference/gen_alignment_golden.py: PyTorch, float64, teacher-forced),
// and layer 0's with --alignment-layer 0 (tiny has two decoder layers), for sources of 1-8 pieces and targets of 0-10, with 2
// slots for 4 sentences (continuous batching: rows at different positions, slots refilled).
TEST(Alignment, ForcedDecodingEqualsTheReferenceCrossAttention) {
  std::vector<std::pair<const char *, int>> cases{{"tiny", -1}, {"tiny", 0}, {"tiny-prenorm", -1}};
  for (const auto &[spec, layer] : cases) {
    SCOPED_TRACE(std::string(spec) + " layer " + std::to_string(layer));
    auto model = alignmentModel(spec, layer);
    ASSERT_TRUE(model);
    tfmrt::TensorMap golden;
    ASSERT_TRUE(tfmrt::readSafetensors(kSource + "/tests/golden/" + spec + ".alignment.safetensors", golden).ok());
    std::vector<std::vector<int32_t>> sources, targets;
    for (size_t i = 0; golden.count("src." + std::to_string(i)); ++i) {
      const tfmrt::Tensor &s = golden.at("src." + std::to_string(i)), &t = golden.at("tgt." + std::to_string(i));
      sources.emplace_back(s.data<int32_t>(), s.data<int32_t>() + s.numel());
      targets.emplace_back(t.data<int32_t>(), t.data<int32_t>() + t.numel());
    }
    ASSERT_EQ(sources.size(), 4u);
    tfmdata::SearchOptions o;
    o.alignment = true;
    o.maxSentences = 2;
    std::unique_ptr<tfmdata::Translator> tr;
    ASSERT_TRUE(tfmdata::Translator::create(*model, o, tr).ok());
    std::vector<std::vector<tfmdata::Hypothesis>> out;
    ASSERT_TRUE(tr->score(sources, targets, out).ok());
    for (size_t i = 0; i < sources.size(); ++i) {
      SCOPED_TRACE("pair " + std::to_string(i));
      const tfmrt::Tensor &expected =
          golden.at(layer < 0 ? "alignment." + std::to_string(i) : "alignment.layer" + std::to_string(layer) + "." + std::to_string(i));
      const std::vector<std::vector<float>> &rows = out[i][0].alignment;
      ASSERT_EQ(int64_t(rows.size()), expected.shape[0]);  // the target's tokens, then </s>
      for (size_t j = 0; j < rows.size(); ++j) {
        ASSERT_EQ(int64_t(rows[j].size()), expected.shape[1]);  // the source's pieces, then </s>
        for (size_t p = 0; p < rows[j].size(); ++p)
          EXPECT_NEAR(rows[j][p], expected.data<float>()[int64_t(j) * expected.shape[1] + int64_t(p)], 2e-5)
              << "row " << j << " source " << p;
      }
    }
  }
}

// The search carries each hypothesis' alignment through beam re-ranking and cache reordering, and
// through sampling with beam K (K samples from one start): every n-best hypothesis' rows equal
// forced decoding's rows for its tokens (an output cut at the length limit has no </s> row).
// Translations do not change with the alignment on.
TEST(Alignment, HypothesesCarryTheirOwnRows) {
  auto model = alignmentModel("tiny");
  ASSERT_TRUE(model);
  const std::vector<std::vector<int32_t>> sources{{5, 9, 13, 7, 21}, {30}, {11, 12, 13, 14, 15, 16, 17, 18}, {4, 4}, {40, 41}};
  for (bool sample : {false, true}) {
    SCOPED_TRACE(sample ? "sampling, beam 3" : "beam 4");
    tfmdata::SearchOptions o;
    o.beam = sample ? 3 : 4;
    o.nBest = o.beam;
    o.sample = sample;
    o.seed = 11;
    o.maxSentences = 2;
    std::vector<std::vector<tfmdata::Hypothesis>> plain, aligned, forced;
    std::unique_ptr<tfmdata::Translator> t;
    ASSERT_TRUE(tfmdata::Translator::create(*model, o, t).ok());
    ASSERT_TRUE(t->translate(sources, plain).ok());
    o.alignment = true;
    ASSERT_TRUE(tfmdata::Translator::create(*model, o, t).ok());
    ASSERT_TRUE(t->translate(sources, aligned).ok());
    size_t checked = 0;
    for (size_t i = 0; i < sources.size(); ++i) {
      ASSERT_EQ(aligned[i].size(), plain[i].size());
      for (size_t k = 0; k < aligned[i].size(); ++k) {
        SCOPED_TRACE("sentence " + std::to_string(i) + " hypothesis " + std::to_string(k));
        const tfmdata::Hypothesis &h = aligned[i][k];
        EXPECT_EQ(h.tokens, plain[i][k].tokens);
        EXPECT_EQ(h.alignment.size(), h.tokenLogProbs.size());
        ASSERT_TRUE(t->score({sources[i]}, {h.tokens}, forced).ok());
        const std::vector<std::vector<float>> &want = forced[0][0].alignment;  // tokens, then </s>
        ASSERT_GE(want.size(), h.alignment.size());
        ASSERT_GE(h.alignment.size() + 1, want.size());
        for (size_t j = 0; j < h.alignment.size(); ++j) {
          ASSERT_EQ(h.alignment[j].size(), sources[i].size() + 1);
          double sum = 0;
          for (size_t p = 0; p < h.alignment[j].size(); ++p) {
            EXPECT_NEAR(h.alignment[j][p], want[j][p], 1e-5) << "row " << j;
            sum += h.alignment[j][p];
          }
          EXPECT_NEAR(sum, 1.0, 1e-5);
          ++checked;
        }
      }
    }
    EXPECT_GT(checked, 50u);
  }
}

// --precision=bf16 (bf16 cross keys and GEMM operands): the alignment still comes out, each row a
// distribution close to the f32 reference's (bf16 rounding of keys and projections).
TEST(Alignment, Bf16KeysStayCloseToTheReference) {
  tfmc::ModelSpec parsed;
  ASSERT_TRUE(tfmc::test::parseSpec("tiny", parsed));
  tfmc::PipelineOptions pipeline;
  pipeline.translate = pipeline.alignment = pipeline.bf16 = true;
  auto model = compileAndLoad(parsed, tfmrt::KernelBackend::Dnnl, pipeline);
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->loadWeights(kSource + "/tests/golden/tiny.weights.safetensors").ok());
  tfmrt::TensorMap golden;
  ASSERT_TRUE(tfmrt::readSafetensors(kSource + "/tests/golden/tiny.alignment.safetensors", golden).ok());
  const tfmrt::Tensor &s = golden.at("src.2"), &tg = golden.at("tgt.2"), &expected = golden.at("alignment.2");
  tfmdata::SearchOptions o;
  o.alignment = true;
  std::unique_ptr<tfmdata::Translator> t;
  ASSERT_TRUE(tfmdata::Translator::create(*model, o, t).ok());
  std::vector<std::vector<tfmdata::Hypothesis>> out;
  ASSERT_TRUE(t->score({std::vector<int32_t>(s.data<int32_t>(), s.data<int32_t>() + s.numel())},
                       {std::vector<int32_t>(tg.data<int32_t>(), tg.data<int32_t>() + tg.numel())}, out)
                  .ok());
  const std::vector<std::vector<float>> &rows = out[0][0].alignment;
  ASSERT_EQ(int64_t(rows.size()), expected.shape[0]);
  double worst = 0;
  for (size_t j = 0; j < rows.size(); ++j) {
    ASSERT_EQ(int64_t(rows[j].size()), expected.shape[1]);
    double sum = 0;
    for (size_t p = 0; p < rows[j].size(); ++p) {
      worst = std::max(worst, std::abs(double(rows[j][p]) - expected.data<float>()[int64_t(j) * expected.shape[1] + int64_t(p)]));
      sum += rows[j][p];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
  EXPECT_LT(worst, 0.05);
  // bf16 did round something: the f32 model is within 2e-5 of the reference (the test above).
  EXPECT_GT(worst, 2e-5) << "bf16 alignment as close as f32's";
}

TEST(Alignment, Refusals) {
  auto model = alignmentModel("tiny");
  ASSERT_TRUE(model);
  tfmdata::SearchOptions o;
  o.alignment = true;
  o.useCache = false;
  std::unique_ptr<tfmdata::Translator> t;
  tfmrt::Status s = tfmdata::Translator::create(*model, o, t);
  EXPECT_NE(s.message().find("drop --no-cache"), std::string::npos) << s.message();
  auto without = compileAndLoad("tiny", tfmrt::KernelBackend::Dnnl, "all", false, false, /*translate=*/true);
  ASSERT_TRUE(without);
  o.useCache = true;
  s = tfmdata::Translator::create(*without, o, t);
  EXPECT_NE(s.message().find("--entries=forward,translate,alignment"), std::string::npos) << s.message();
  // In an ensemble the alignment is the first model's: the second need not have it.
  ASSERT_TRUE(without->loadWeights(kSource + "/tests/golden/tiny.weights.safetensors").ok());
  EXPECT_TRUE(tfmdata::Translator::create({model.get(), without.get()}, {}, o, t).ok());
  EXPECT_FALSE(tfmdata::Translator::create({without.get(), model.get()}, {}, o, t).ok());
}

}  // namespace
