#include "tfmdata/search.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace tfmdata {
namespace {

struct Hypothesis {
  std::vector<int32_t> tokens;  // generated ids, EOS excluded
  double score = 0;             // sum of log-probabilities
};

struct SentenceState {
  std::vector<Hypothesis> live, finished;
  std::vector<double> finishedScores;  // length-normalised
  int64_t maxOut = 0;                  // generated tokens allowed, EOS included
  bool done = false;
};

double lengthNormalised(double score, size_t length, double alpha) {
  return score / std::pow((5.0 + double(length)) / 6.0, alpha);
}

}  // namespace

tfmrt::Status translateBatch(tfmrt::Model &model, const std::vector<std::vector<int32_t>> &sources,
                             const SearchOptions &o, std::vector<std::vector<int32_t>> &outputs) {
  const int64_t N = int64_t(sources.size());
  outputs.assign(size_t(N), {});
  if (N == 0) return tfmrt::Status::OK();
  const int K = std::max(1, o.beam);

  // Sources with EOS, truncated to max_len, padded.
  int64_t S = 1;
  for (const auto &s : sources) S = std::max<int64_t>(S, std::min<int64_t>(int64_t(s.size()) + 1, o.maxLen));
  std::vector<int32_t> srcIds(size_t(N * S), o.pad);
  std::vector<SentenceState> state(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    const int64_t len = std::min<int64_t>(int64_t(sources[n].size()), S - 1);
    std::copy(sources[n].begin(), sources[n].begin() + len, srcIds.begin() + n * S);
    srcIds[n * S + len] = o.eos;
    state[n].maxOut = std::max<int64_t>(
        1, std::min<int64_t>(o.maxLen - 1, int64_t(o.maxLengthRatio * double(len)) + o.maxLengthOffset));
    state[n].live.push_back(Hypothesis());
  }
  const tfmrt::Tensor src = tfmrt::Tensor::i32({N, S}, srcIds);
  std::vector<tfmrt::Tensor> encoded;
  TFMRT_RETURN_IF_ERROR(model.run("encode", {src}, encoded));
  const tfmrt::Tensor &memory = encoded[0];
  const int64_t D = memory.shape[2];

  std::vector<tfmrt::Tensor> decoded;
  // Source and memory rows per hypothesis; rebuilt only when the sentence of some row changes
  // (a sentence finishes, or its beam fills up), not every step.
  tfmrt::Tensor srcRep, memRep;
  std::vector<int64_t> repSentences;
  std::vector<int32_t> idx;
  for (int64_t t = 0;; ++t) {
    // Rows: every live hypothesis of every unfinished sentence.
    std::vector<std::pair<int64_t, int>> rows;  // (sentence, live index)
    std::vector<int64_t> rowSentences;
    for (int64_t n = 0; n < N; ++n)
      if (!state[n].done)
        for (int j = 0; j < int(state[n].live.size()); ++j) {
          rows.push_back({n, j});
          rowSentences.push_back(n);
        }
    if (rows.empty()) break;
    const int64_t R = int64_t(rows.size()), T = t + 1;
    if (rowSentences != repSentences) {
      srcRep = tfmrt::Tensor(tfmrt::DType::I32, {R, S});
      memRep = tfmrt::Tensor(tfmrt::DType::F32, {R, S, D});
      for (int64_t r = 0; r < R; ++r) {
        const int64_t n = rowSentences[r];
        std::memcpy(srcRep.data<int32_t>() + r * S, srcIds.data() + n * S, size_t(S) * sizeof(int32_t));
        std::memcpy(memRep.data<float>() + r * S * D, memory.data<float>() + n * S * D, size_t(S * D) * sizeof(float));
      }
      repSentences = std::move(rowSentences);
    }
    tfmrt::Tensor tgt(tfmrt::DType::I32, {R, T});
    for (int64_t r = 0; r < R; ++r) {
      const auto [n, j] = rows[r];
      int32_t *row = tgt.data<int32_t>() + r * T;
      row[0] = o.bos;
      std::copy(state[n].live[j].tokens.begin(), state[n].live[j].tokens.end(), row + 1);
    }
    TFMRT_RETURN_IF_ERROR(model.run("decode", {srcRep, memRep, tgt}, decoded));
    const int64_t V = decoded[0].shape[2];

    // Per sentence: the best 2K extensions of its live hypotheses.
    std::vector<std::vector<std::pair<double, std::pair<int, int32_t>>>> candidates(static_cast<size_t>(N));
    for (int64_t r = 0; r < R; ++r) {
      const auto [n, j] = rows[r];
      const float *z = decoded[0].data<float>() + r * V;  // decode returns the last position only
      const double mx = *std::max_element(z, z + V);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(double(z[v]) - mx);
      const double lse = mx + std::log(sum);
      idx.resize(size_t(V));
      std::iota(idx.begin(), idx.end(), 0);
      const size_t keep = std::min<size_t>(size_t(2 * K), size_t(V));
      std::partial_sort(idx.begin(), idx.begin() + keep, idx.end(), [&](int32_t a, int32_t b) { return z[a] > z[b]; });
      for (size_t c = 0; c < keep; ++c)
        candidates[n].push_back({state[n].live[j].score + double(z[idx[c]]) - lse, {j, idx[c]}});
    }
    for (int64_t n = 0; n < N; ++n) {
      SentenceState &st = state[n];
      if (st.done) continue;
      auto &cand = candidates[n];
      std::stable_sort(cand.begin(), cand.end(), [](const auto &a, const auto &b) { return a.first > b.first; });
      const bool lastStep = T >= st.maxOut;  // the next token must end the output
      std::vector<Hypothesis> next;
      for (const auto &[score, pick] : cand) {
        const auto [j, token] = pick;
        if (token == o.eos || lastStep) {
          Hypothesis h = st.live[j];
          if (token != o.eos) h.tokens.push_back(token);
          st.finishedScores.push_back(lengthNormalised(score, h.tokens.size() + 1, o.lengthPenalty));
          h.score = score;
          st.finished.push_back(std::move(h));
        } else if (int(next.size()) < K) {
          Hypothesis h = st.live[j];
          h.tokens.push_back(token);
          h.score = score;
          next.push_back(std::move(h));
        }
        if (int(st.finished.size()) >= K) break;
      }
      st.live = std::move(next);
      st.done = int(st.finished.size()) >= K || st.live.empty() || lastStep;
      if (st.done && st.finished.empty())  // cannot happen (lastStep finishes), kept for safety
        for (const Hypothesis &h : st.live) {
          st.finishedScores.push_back(lengthNormalised(h.score, h.tokens.size() + 1, o.lengthPenalty));
          st.finished.push_back(h);
        }
    }
  }
  for (int64_t n = 0; n < N; ++n) {
    const SentenceState &st = state[n];
    if (st.finished.empty()) continue;
    const size_t best = size_t(std::max_element(st.finishedScores.begin(), st.finishedScores.end()) -
                               st.finishedScores.begin());
    outputs[n] = st.finished[best].tokens;
  }
  return tfmrt::Status::OK();
}

}  // namespace tfmdata
