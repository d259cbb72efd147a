#include "tfmdata/batcher.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace tfmdata {

tfmrt::Status Batcher::create(std::vector<Example> examples, const BatcherOptions &options, Batcher &out) {
  out = Batcher();
  out.options_ = options;
  const size_t given = examples.size();
  size_t emptySide = 0;
  for (Example &e : examples) {
    // + 1 for EOS on the source and BOS/EOS (one each side of the shift) on the target.
    if (int64_t(e.src.size()) + 1 > options.maxLen || int64_t(e.tgt.size()) + 1 > options.maxLen || e.src.empty() ||
        e.tgt.empty()) {
      ++out.dropped_;
      emptySide += e.src.empty() || e.tgt.empty();
      continue;
    }
    out.examples_.push_back(std::move(e));
  }
  // Why nothing is left, in the user's terms (an empty corpus was reported as too long for max_len).
  if (given == 0) return tfmrt::invalidArgument("the corpus has no sentence pairs");
  if (out.examples_.empty() && emptySide == given)
    return tfmrt::invalidArgument("none of the corpus's " + std::to_string(given) +
                                  " sentence pairs has text on both sides (empty or whitespace-only lines)");
  if (out.examples_.empty())
    return tfmrt::invalidArgument("no sentence pair fits max_len " + std::to_string(options.maxLen) + " (" +
                                  std::to_string(given - emptySide) + " pairs longer, " + std::to_string(emptySide) +
                                  " with an empty side)");
  std::vector<int64_t> order(out.examples_.size());
  std::iota(order.begin(), order.end(), 0);
  auto len = [&](int64_t i) { return std::make_pair(out.examples_[i].tgt.size(), out.examples_[i].src.size()); };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return len(a) < len(b); });
  std::vector<int64_t> current;
  int64_t maxSrc = 0, maxTgt = 0;
  for (int64_t i : order) {
    const int64_t s = int64_t(out.examples_[i].src.size()) + 1, t = int64_t(out.examples_[i].tgt.size()) + 1;
    const int64_t n = int64_t(current.size()) + 1;
    if (!current.empty() && n * std::max(std::max(maxSrc, s), std::max(maxTgt, t)) > options.batchTokens) {
      out.batches_.push_back(std::move(current));
      current.clear();
      maxSrc = maxTgt = 0;
    }
    current.push_back(i);
    maxSrc = std::max(maxSrc, s);
    maxTgt = std::max(maxTgt, t);
  }
  if (!current.empty()) out.batches_.push_back(std::move(current));
  for (const auto &b : out.batches_) {
    const Example &e = out.examples_[size_t(b[0])];
    if (b.size() == 1 && int64_t(std::max(e.src.size(), e.tgt.size())) + 1 > options.batchTokens) ++out.overBudget_;
  }
  return tfmrt::Status::OK();
}

const std::vector<int64_t> &Batcher::epochOrder(int64_t epoch) const {
  if (epoch != orderEpoch_) {
    order_.resize(batches_.size());
    std::iota(order_.begin(), order_.end(), 0);
    std::mt19937_64 rng(options_.seed * 0x9E3779B97F4A7C15ull + uint64_t(epoch));
    // Fisher-Yates with our own index draws: std::shuffle's algorithm is implementation-defined.
    for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng() % i]);
    orderEpoch_ = epoch;
  }
  return order_;
}

Batch Batcher::batch(int64_t epoch, int64_t index) const {
  const std::vector<int64_t> &order = epochOrder(epoch);
  return make(batches_[order[index % int64_t(order.size())]]);
}

Batch Batcher::orderedBatch(int64_t index) const { return make(batches_[index]); }

Batch Batcher::make(const std::vector<int64_t> &members) const {
  int64_t S = 0, T = 0;
  for (int64_t i : members) {
    S = std::max<int64_t>(S, int64_t(examples_[i].src.size()) + 1);
    T = std::max<int64_t>(T, int64_t(examples_[i].tgt.size()) + 1);
  }
  const int64_t B = int64_t(members.size());
  Batch b;
  std::vector<int32_t> src(B * S, options_.pad), tgtIn(B * T, options_.pad), tgtOut(B * T, options_.pad);
  for (int64_t r = 0; r < B; ++r) {
    const Example &e = examples_[members[r]];
    std::copy(e.src.begin(), e.src.end(), src.begin() + r * S);
    src[r * S + int64_t(e.src.size())] = options_.eos;
    tgtIn[r * T] = options_.bos;
    std::copy(e.tgt.begin(), e.tgt.end(), tgtIn.begin() + r * T + 1);
    std::copy(e.tgt.begin(), e.tgt.end(), tgtOut.begin() + r * T);
    tgtOut[r * T + int64_t(e.tgt.size())] = options_.eos;
    b.srcTokens += int64_t(e.src.size()) + 1;
    b.tgtTokens += int64_t(e.tgt.size()) + 1;
  }
  b.src = tfmrt::Tensor::i32({B, S}, src);
  b.tgtIn = tfmrt::Tensor::i32({B, T}, tgtIn);
  b.tgtOut = tfmrt::Tensor::i32({B, T}, tgtOut);
  b.pairs = B;
  return b;
}

}  // namespace tfmdata
