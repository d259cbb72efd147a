#include "tfmdata/search.h"

#include "tfmdata/ensemble_mix.h"
#include "tfmdata/row_top.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <new>
#include <limits>
#include <numeric>
#include <string>

namespace tfmdata {
namespace {

using tfmrt::Status;
using tfmrt::Tensor;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double lengthPenalty(size_t length, double alpha) { return std::pow((5.0 + double(length)) / 6.0, alpha); }

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A uniform draw in [0, 1) keyed by (seed, sentence, position): independent of batching.
double uniformDraw(uint64_t seed, uint64_t sentence, int64_t position) {
  const uint64_t key = splitmix64(seed ^ splitmix64(sentence ^ splitmix64(uint64_t(position))));
  return double(key >> 11) * (1.0 / 9007199254740992.0);
}

struct Live {
  std::vector<int32_t> tokens;
  std::vector<double> tokenLogProbs;  // one per token
  // With SearchOptions::alignment, one row per token (the source's pieces and </s>), flat: an
  // extension copies one buffer, not a vector per token.
  std::vector<float> alignment;
  double logProb = 0;
  int32_t row = 0;      // its row in the last decoder call (the cache row holding its prefix)
  int32_t sample = 0;   // sampling with beam K: which of the sentence's K samples (keys its draws)
  int32_t callRow = 0;  // its row in the current call
};

struct SentenceState {
  std::vector<Live> live;
  std::vector<Hypothesis> finished;
  int64_t maxOut = 0;  // output tokens allowed, EOS included
  bool done = false;
  bool spawned = false;  // sampling with beam K: the K samples have left the start hypothesis
};

// Per row of a decoder call: log-sum-exp of the logits and the best `keep` tokens, best first
// (ties: lower id first), never `skipA` / `skipB` (padding and BOS: a generated pad would be
// masked as padding when the prefix is read back, so no search may emit it).
struct RowTop {
  double lse = 0;
  std::vector<detail::ScoredToken> best;
};

using detail::rowLogSumExp;

// `normalised`: z already holds log-probabilities (decode_step), so lse = 0.
// `banned`: tokens not to keep (padding, BOS and the search constraints'), sorted. When they
// leave nothing, `fallback` is kept (an empty row would leave the hypothesis no way on).
void scoreRow(const float *z, int64_t V, size_t keep, const std::vector<int32_t> &banned, int32_t fallback,
              bool normalised, RowTop &out) {
  out.lse = normalised ? 0.0 : rowLogSumExp(z, V);
  detail::topTokens(z, V, keep, banned, out.best);
  if (out.best.empty()) out.best.push_back({z[fallback], fallback});
}

// The tokens row `tokens` may not emit next (sorted, unique): padding and BOS always; </s>
// before minLength tokens; with noRepeatNgram = n, every token that completes an n-gram whose
// first n - 1 tokens equal the hypothesis' last n - 1 (fairseq's and CTranslate2's rule).
void bannedTokens(const SearchOptions &o, const std::vector<int32_t> &tokens, std::vector<int32_t> &out) {
  out.assign({o.pad, o.bos});
  if (int64_t(tokens.size()) < o.minLength) out.push_back(o.eos);
  const int64_t n = o.noRepeatNgram, t = int64_t(tokens.size());
  if (n > 0 && t >= n - 1)
    for (int64_t i = 0; i + n - 1 < t; ++i)
      if (std::equal(tokens.begin() + i, tokens.begin() + i + n - 1, tokens.end() - (n - 1)))
        out.push_back(tokens[size_t(i + n - 1)]);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

}  // namespace

// Produces next-token scores [R, 1, V] for rows given by (slot, parent row, position, prefix):
// log-probabilities (normalised) or logits. Sources are encoded a block at a time (`encode`, many
// sentences in one call, so the encoder's products have many rows) and sentences of the last
// block enter free slots (`admit`); a row's sentence is its slot.
struct Translator::Decoder {
  virtual ~Decoder() = default;
  virtual bool normalised() const = 0;
  // Rows may be at different positions, so sentences can enter while others are decoded
  // (continuous batching); otherwise a batch of sentences is admitted only when none is left.
  virtual bool continuous() const = 0;
  // Up to `slots` sentences of up to `maxSource` tokens (EOS included), `maxRows` rows and
  // `maxSteps` positions.
  virtual Status reserve(int64_t slots, int64_t maxSource, int64_t maxRows, int64_t maxSteps) = 0;
  // Encodes src [n, S] (S <= maxSource; rows padded): the block the next admits take from.
  virtual Status encode(const Tensor &src) = 0;
  // Row blockRows[i] of the last encoded block (a source of lengths[i] tokens, EOS included)
  // into slot slots[i].
  virtual Status admit(const std::vector<int32_t> &blockRows, const std::vector<int32_t> &lengths,
                       const std::vector<int32_t> &slots) = 0;
  virtual Status step(const std::vector<int32_t> &positions, const std::vector<int32_t> &rowSlot,
                      const std::vector<int32_t> &parents, const std::vector<const std::vector<int32_t> *> &prefixes,
                      const Tensor *&logits) = 0;
  // The last step's attention weights [R, 1, S] (S >= every row's source length), if the decoder
  // has them (decode_step compiled with alignment).
  virtual const Tensor *alignment() const { return nullptr; }
};

namespace {

// The last encoded block and, per slot, its source and the encoder outputs [first, first + count)
// (count 0: all from `first`): admitted rows of the block are copied into their slots' rows
// [0, S) (positions past a source's length are padding in `src`, so never attended to).
struct SlotBuffers {
  size_t first = 0, count = 0;
  Tensor block;                 // the last encoded block's sources [n, S]
  std::vector<Tensor> encoded;  // encode's outputs for it
  Tensor src;                   // [slots, maxSource] ids, pad-filled
  std::vector<Tensor> values;   // [slots, maxSource, D] each
  int64_t slots = 0, maxSource = 0;
  bool sized = false;  // at the first store, once D is known

  void reset(int64_t slotCount, int64_t maxSourceTokens) {
    slots = slotCount;
    maxSource = maxSourceTokens;
    sized = false;
  }
  std::vector<bool> wanted;  // encode's outputs to compute (empty: all)
  Status encode(tfmrt::Session &session, const Tensor &sources) {
    block = sources;
    return wanted.empty() ? session.run("encode", {sources}, encoded) : session.run("encode", {sources}, encoded, wanted);
  }
  // Row rows[i] of the block into slot slots[i].
  void store(const std::vector<int32_t> &rows, const std::vector<int32_t> &slotsOf, int32_t pad) {
    if (!sized) {
      src.resize(tfmrt::DType::I32, {slots, maxSource});
      std::fill(src.data<int32_t>(), src.data<int32_t>() + slots * maxSource, pad);
      values.resize(count ? count : encoded.size() - first);
      // On 2 MiB pages mapped on first touch: the cached decoder's six buffers are ~30 MB for 128
      // slots, and heap storage was populated and zeroed 4 KiB at a time (~10 ms, 1.5 % of a
      // greedy test-set run). Kept across calls when large enough, as resize() keeps storage.
      // The element type is encode's: f32, or bf16 cross K/V (tfm-lower-kv-precision).
      for (size_t i = 0; i < values.size(); ++i) {
        Tensor &v = values[i];
        const tfmrt::DType dtype = encoded[first + i].dtype;
        const std::vector<int64_t> shape{slots, maxSource, encoded[first + i].shape[2]};
        if (v.capacity() < size_t(slots * maxSource * shape[2]) * tfmrt::dtypeSize(dtype))
          v = Tensor::largeBuffer(dtype, shape);
        else
          v.resize(dtype, shape);
      }
      sized = true;
    }
    const int64_t S = block.shape[1];
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t r = rows[i], slot = slotsOf[i];
      int32_t *row = src.data<int32_t>() + slot * maxSource;
      std::copy(block.data<int32_t>() + r * S, block.data<int32_t>() + (r + 1) * S, row);
      std::fill(row + S, row + maxSource, pad);
      for (size_t v = 0; v < values.size(); ++v) {
        const int64_t D = values[v].shape[2];
        const size_t elem = tfmrt::dtypeSize(values[v].dtype);
        uint8_t *dst = values[v].data<uint8_t>() + size_t(slot * maxSource * D) * elem;
        // Positions [S, maxSource) keep an earlier sentence's values (zeros at first): masked by
        // `src`, so never attended to, and finite (weighed by 0, never 0 * NaN). Re-filling them
        // with zeros wrote most of each admission's bytes.
        std::memcpy(dst, encoded[first + v].data<uint8_t>() + size_t(r * S * D) * elem, size_t(S * D) * elem);
      }
    }
  }
};

// encode once per block of sources, then decode_step with the session's K/V cache.
class CachedDecoder final : public Translator::Decoder {
public:
  CachedDecoder(std::unique_ptr<tfmrt::Session> session, int32_t bos, int32_t pad, int64_t maxLen, bool perRowSteps)
      : session_(std::move(session)), bos_(bos), pad_(pad), maxLen_(maxLen), perRowSteps_(perRowSteps) {
    buffers_.first = 1;  // the cross K/V, not the memory
  }
  bool normalised() const override { return true; }  // decode_step returns log-probabilities
  bool continuous() const override { return perRowSteps_; }
  Status reserve(int64_t slots, int64_t maxSource, int64_t maxRows, int64_t maxSteps) override {
    // Positions rounded up to a power of two (<= max_len): successive calls (a stream, or a
    // length-sorted corpus) would otherwise re-allocate the cache at nearly every call.
    int64_t steps = 16;
    while (steps < maxSteps) steps *= 2;
    const int64_t positions = std::max(maxSteps, std::min(steps, maxLen_));
    if (Status st = session_->bindStates({maxRows, positions}); !st.ok())
      return Status(st.code(), "the K/V cache for " + std::to_string(maxRows) + " hypotheses (sentences in flight x beam) of " +
                                   std::to_string(positions) + " positions: " + st.message() +
                                   " (lower --batch or --beam)");
    buffers_.reset(slots, maxSource);
    return Status::OK();
  }
  Status encode(const Tensor &src) override { return buffers_.encode(*session_, src); }
  Status admit(const std::vector<int32_t> &blockRows, const std::vector<int32_t> &,
               const std::vector<int32_t> &slots) override {
    buffers_.store(blockRows, slots, pad_);
    return Status::OK();
  }
  Status step(const std::vector<int32_t> &positions, const std::vector<int32_t> &rowSlot,
              const std::vector<int32_t> &parents, const std::vector<const std::vector<int32_t> *> &prefixes,
              const Tensor *&logits) override {
    // tokens, step, parents, rows, src, then the cross K/V; the small inputs are rewritten in
    // place (their storage is reused once the largest R was seen), the slot buffers swapped in
    // and back so both keep their storage.
    const int64_t R = int64_t(rowSlot.size());
    inputs_.resize(4 + 1 + buffers_.values.size());
    inputs_[0].resize(tfmrt::DType::I32, {R, 1});
    if (perRowSteps_) inputs_[1].resize(tfmrt::DType::I32, {R});
    else inputs_[1].resize(tfmrt::DType::I32, {});  // an artifact of format 1 decode_step: one position
    inputs_[2].resize(tfmrt::DType::I32, {R});
    inputs_[3].resize(tfmrt::DType::I32, {R});
    int32_t *tokens = inputs_[0].data<int32_t>();
    for (int64_t r = 0; r < R; ++r) tokens[r] = prefixes[r]->empty() ? bos_ : prefixes[r]->back();
    std::copy(positions.begin(), positions.begin() + (perRowSteps_ ? R : 1), inputs_[1].data<int32_t>());
    std::copy(parents.begin(), parents.end(), inputs_[2].data<int32_t>());
    std::copy(rowSlot.begin(), rowSlot.end(), inputs_[3].data<int32_t>());
    std::swap(inputs_[4], buffers_.src);
    for (size_t i = 0; i < buffers_.values.size(); ++i) std::swap(inputs_[5 + i], buffers_.values[i]);
    Status st = session_->run("decode_step", inputs_, out_);
    std::swap(inputs_[4], buffers_.src);
    for (size_t i = 0; i < buffers_.values.size(); ++i) std::swap(inputs_[5 + i], buffers_.values[i]);
    TFMRT_RETURN_IF_ERROR(st);
    logits = &out_[0];
    return Status::OK();
  }
  const Tensor *alignment() const override { return out_.size() > 1 ? &out_[1] : nullptr; }

private:
  std::unique_ptr<tfmrt::Session> session_;
  int32_t bos_, pad_;
  int64_t maxLen_;
  bool perRowSteps_;
  SlotBuffers buffers_;  // src and cross_k.l / cross_v.l per slot
  std::vector<Tensor> inputs_, out_;
};

// The reference path: `decode` over [BOS] + prefix for every row, every step. Not continuous:
// the rows are at one position. Each call's sources and memory are as long as the longest source
// in flight.
class FullPrefixDecoder final : public Translator::Decoder {
public:
  FullPrefixDecoder(std::unique_ptr<tfmrt::Session> session, int32_t bos, int32_t pad, size_t encodeOutputs)
      : session_(std::move(session)), bos_(bos), pad_(pad) {
    buffers_.count = 1;  // the memory; encode's cross K/V (the cached decoder's) are not computed
    buffers_.wanted.assign(encodeOutputs, false);
    buffers_.wanted[0] = true;
  }
  bool normalised() const override { return false; }
  bool continuous() const override { return false; }
  Status reserve(int64_t slots, int64_t maxSource, int64_t, int64_t) override {
    buffers_.reset(slots, maxSource);
    slotLength_.assign(size_t(slots), 0);
    repSlots_.clear();
    return Status::OK();
  }
  Status encode(const Tensor &src) override { return buffers_.encode(*session_, src); }
  Status admit(const std::vector<int32_t> &blockRows, const std::vector<int32_t> &lengths,
               const std::vector<int32_t> &slots) override {
    buffers_.store(blockRows, slots, pad_);
    for (size_t i = 0; i < slots.size(); ++i) slotLength_[size_t(slots[i])] = lengths[i];
    repSlots_.clear();
    return Status::OK();
  }
  Status step(const std::vector<int32_t> &positions, const std::vector<int32_t> &rowSlot,
              const std::vector<int32_t> &, const std::vector<const std::vector<int32_t> *> &prefixes,
              const Tensor *&logits) override {
    const int64_t R = int64_t(rowSlot.size()), T = positions[0] + 1, Smax = buffers_.src.shape[1];
    const int64_t D = buffers_.values[0].shape[2];
    // Source and memory rows per hypothesis, rebuilt only when some row's sentence changes.
    if (rowSlot != repSlots_) {
      int64_t S = 1;
      for (int32_t slot : rowSlot) S = std::max<int64_t>(S, slotLength_[size_t(slot)]);
      srcRep_ = Tensor(tfmrt::DType::I32, {R, S});
      memRep_ = Tensor(tfmrt::DType::F32, {R, S, D});
      for (int64_t r = 0; r < R; ++r) {
        const int64_t slot = rowSlot[r];
        std::memcpy(srcRep_.data<int32_t>() + r * S, buffers_.src.data<int32_t>() + slot * Smax,
                    size_t(S) * sizeof(int32_t));
        std::memcpy(memRep_.data<float>() + r * S * D, buffers_.values[0].data<float>() + slot * Smax * D,
                    size_t(S * D) * sizeof(float));
      }
      repSlots_ = rowSlot;
    }
    Tensor tgt(tfmrt::DType::I32, {R, T});
    for (int64_t r = 0; r < R; ++r) {
      if (int64_t(prefixes[r]->size()) + 1 != T) return tfmrt::internalError("full-prefix decoder: rows at different positions");
      int32_t *row = tgt.data<int32_t>() + r * T;
      row[0] = bos_;
      std::copy(prefixes[r]->begin(), prefixes[r]->end(), row + 1);
    }
    TFMRT_RETURN_IF_ERROR(session_->run("decode", {srcRep_, memRep_, tgt}, out_));
    logits = &out_[0];
    return Status::OK();
  }

private:
  std::unique_ptr<tfmrt::Session> session_;
  int32_t bos_, pad_;
  SlotBuffers buffers_;              // src and the memory per slot
  std::vector<int32_t> slotLength_;  // source tokens (EOS included) per slot
  Tensor srcRep_, memRep_;
  std::vector<int32_t> repSlots_;
  std::vector<Tensor> out_;
};

// An ensemble's decoder: each member (a decoder of its own model) scores the same rows, and the
// result is the mixture log sum_i w_i p_i (detail::mixLogProbs).
class EnsembleDecoder final : public Translator::Decoder {
public:
  EnsembleDecoder(std::vector<std::unique_ptr<Translator::Decoder>> members, const std::vector<double> &weights,
                  int threads)
      : members_(std::move(members)), weights_(weights.begin(), weights.end()), threads_(threads) {}
  bool normalised() const override { return true; }
  bool continuous() const override {  // only if every member takes rows at different positions
    for (const auto &m : members_)
      if (!m->continuous()) return false;
    return true;
  }
  Status reserve(int64_t slots, int64_t maxSource, int64_t maxRows, int64_t maxSteps) override {
    for (auto &m : members_) TFMRT_RETURN_IF_ERROR(m->reserve(slots, maxSource, maxRows, maxSteps));
    return Status::OK();
  }
  Status encode(const Tensor &src) override {
    for (auto &m : members_) TFMRT_RETURN_IF_ERROR(m->encode(src));
    return Status::OK();
  }
  Status admit(const std::vector<int32_t> &blockRows, const std::vector<int32_t> &lengths,
               const std::vector<int32_t> &slots) override {
    for (auto &m : members_) TFMRT_RETURN_IF_ERROR(m->admit(blockRows, lengths, slots));
    return Status::OK();
  }
  Status step(const std::vector<int32_t> &positions, const std::vector<int32_t> &rowSlot,
              const std::vector<int32_t> &parents, const std::vector<const std::vector<int32_t> *> &prefixes,
              const Tensor *&logits) override {
    const size_t M = members_.size();
    scores_.assign(M, nullptr);
    for (size_t i = 0; i < M; ++i) {
      TFMRT_RETURN_IF_ERROR(members_[i]->step(positions, rowSlot, parents, prefixes, scores_[i]));
      if (scores_[i]->shape != scores_[0]->shape)
        return tfmrt::invalidArgument("ensemble members disagree on the target vocabulary: member 1 scores " +
                                      std::to_string(scores_[0]->shape.back()) + " tokens, member " +
                                      std::to_string(i + 1) + " " + std::to_string(scores_[i]->shape.back()));
    }
    const int64_t V = scores_[0]->shape.back(), R = V > 0 ? scores_[0]->numel() / V : 0;
    mixed_.resize(tfmrt::DType::F32, scores_[0]->shape);
    const int threads = R * V * int64_t(M) >= (1 << 16) ? threads_ : 1;
    sums_.resize(size_t(threads) * 512);  // mixLogProbs' scratch per thread
    rowPtrs_.resize(size_t(R) * M);         // per row: each member's scores and shift
    shifts_.resize(size_t(R) * M);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t r = 0; r < R; ++r) {
      const float **rows = rowPtrs_.data() + size_t(r) * M;
      float *shifts = shifts_.data() + size_t(r) * M;
      for (size_t i = 0; i < M; ++i) {
        rows[i] = scores_[i]->data<float>() + r * V;
        // Members that return logits (the full-prefix decoder) are normalised here.
        shifts[i] = members_[i]->normalised() ? 0.0f : float(rowLogSumExp(rows[i], V));
      }
      detail::mixLogProbs(rows, shifts, weights_.data(), int64_t(M), V, mixed_.data<float>() + r * V,
                          sums_.data() + size_t(omp_get_thread_num()) * 512);
    }
    logits = &mixed_;
    return Status::OK();
  }
  const Tensor *alignment() const override { return members_[0]->alignment(); }  // the first model's

private:
  std::vector<std::unique_ptr<Translator::Decoder>> members_;
  std::vector<float> weights_;  // sum 1
  int threads_;
  std::vector<const Tensor *> scores_;
  std::vector<float> sums_;  // per thread, 512
  std::vector<const float *> rowPtrs_;  // reused across steps: no allocation per row
  std::vector<float> shifts_;
  Tensor mixed_;
};

// The decoder the options ask for (cached or full prefix) over a new session of `model`.
Status makeDecoder(tfmrt::Model &model, const SearchOptions &o, std::unique_ptr<Translator::Decoder> &out) {
  const char *needed[] = {"encode", o.useCache ? "decode_step" : "decode"};
  for (const char *entry : needed)
    if (!model.artifact().findFunction(entry))
      return tfmrt::notFound(std::string("the model has no '") + entry +
                             "' entry: compile it with --entries=forward,translate");
  if (o.alignment) {
    if (!o.useCache)
      return tfmrt::invalidArgument("word alignment comes from the cached decoder's decode_step, not the full-prefix "
                                    "reference decoder (drop --no-cache)");
    if (model.artifact().findFunction("decode_step")->outputs.size() < 2)
      return tfmrt::invalidArgument("the model's decode_step returns no attention weights (in an ensemble, the first "
                                    "model's): compile it with --entries=forward,translate,alignment");
  }
  TFMRT_RETURN_IF_ERROR(model.prepare({needed[0], needed[1]}));
  std::unique_ptr<tfmrt::Session> session;
  TFMRT_RETURN_IF_ERROR(tfmrt::Session::create(model, session));
  if (o.useCache) {
    // decode_step's step: one position per row (continuous batching) or, in artifacts compiled
    // before it, one for all rows.
    const tfmrt::EntryFunction &fn = *model.artifact().findFunction("decode_step");
    const bool perRow = fn.inputs.size() > 1 && fn.values[fn.inputs[1]].shape.size() == 1;
    out = std::make_unique<CachedDecoder>(std::move(session), o.bos, o.pad, o.maxLen, perRow);
  } else {
    const size_t encodeOutputs = model.artifact().findFunction("encode")->outputs.size();
    out = std::make_unique<FullPrefixDecoder>(std::move(session), o.bos, o.pad, encodeOutputs);
  }
  return Status::OK();
}

}  // namespace

Translator::~Translator() = default;

Status Translator::create(tfmrt::Model &model, const SearchOptions &o, std::unique_ptr<Translator> &out) {
  // Named by tfmc translate's options: every value the spec gives was checked at compile time.
  if (o.beam < 1) return tfmrt::invalidArgument("--beam must be >= 1, got " + std::to_string(o.beam));
  if (o.nBest < 1 || o.nBest > o.beam)
    return tfmrt::invalidArgument("--n-best " + std::to_string(o.nBest) + " must be in [1, beam = " +
                                  std::to_string(o.beam) + "]");
  if (o.sample && !(o.temperature > 0 && o.temperature <= 1e6))
    return tfmrt::invalidArgument("--temperature must be in (0, " + shortNumber(1e6) + "], got " + shortNumber(o.temperature));
  if (o.topK < 0) return tfmrt::invalidArgument("--top-k must be >= 0, got " + std::to_string(o.topK));
  if (!(o.topP > 0 && o.topP <= 1)) return tfmrt::invalidArgument("--top-p must be in (0, 1], got " + shortNumber(o.topP));
  // ((5 + length) / 6)^alpha stays finite for any length under max_len up to alpha 10 (GNMT's
  // values are 0.6-1); at 1000 every score was -0.
  if (!(o.lengthPenalty >= 0 && o.lengthPenalty <= kMaxLengthPenalty))
    return tfmrt::invalidArgument("--length-penalty must be in [0, " + shortNumber(kMaxLengthPenalty) + "], got " +
                                  shortNumber(o.lengthPenalty));
  if (o.maxLen < 2) return tfmrt::invalidArgument("the model's max_len must be >= 2 to translate");
  if (o.maxSentences < 0 || o.maxSourceTokens < 0)
    return tfmrt::invalidArgument("the batch limits (sentences, source tokens) must be >= 0");
  if (o.encodeBlockTokens < 1) return tfmrt::invalidArgument("the encoder's block size (tokens) must be >= 1");
  if (o.minLength < 0 || o.minLength >= o.maxLen)
    return tfmrt::invalidArgument("--min-length must be in [0, max_len - 1 = " + std::to_string(o.maxLen - 1) +
                                  "], got " + std::to_string(o.minLength));
  if (o.noRepeatNgram < 0 || o.noRepeatNgram > o.maxLen)
    return tfmrt::invalidArgument("--no-repeat-ngram-size must be in [0, max_len = " + std::to_string(o.maxLen) +
                                  "], got " + std::to_string(o.noRepeatNgram));
  if (!(o.maxLengthRatio >= 0 && o.maxLengthRatio <= kMaxLengthRatio))
    return tfmrt::invalidArgument("--max-length-ratio must be in [0, " + shortNumber(kMaxLengthRatio) + "], got " +
                                  shortNumber(o.maxLengthRatio));
  // Any offset is capped by max_len (outputLengthLimit); this bound keeps ratio x length + offset
  // far from overflowing.
  if (o.maxLengthOffset < 0 || o.maxLengthOffset > kMaxLengthOffset)
    return tfmrt::invalidArgument("--max-length-offset must be in [0, " + std::to_string(kMaxLengthOffset) +
                                  "], got " + std::to_string(o.maxLengthOffset));
  // Ratio 0 and offset 0 allowed no token but the one every sentence gets ("A" for each).
  if (o.maxLengthRatio == 0.0 && o.maxLengthOffset < 1)
    return tfmrt::invalidArgument("--max-length-ratio 0 with --max-length-offset 0 leaves no room for an output: give "
                                  "a ratio > 0 or an offset >= 1");
  std::unique_ptr<Translator> t(new Translator());
  t->options_ = o;
  t->threads_ = model.options().num_threads > 0 ? model.options().num_threads : omp_get_max_threads();
  TFMRT_RETURN_IF_ERROR(makeDecoder(model, o, t->decoder_));
  out = std::move(t);
  return Status::OK();
}

Status Translator::create(const std::vector<tfmrt::Model *> &models, const std::vector<double> &weights,
                          const SearchOptions &o, std::unique_ptr<Translator> &out) {
  if (models.empty()) return tfmrt::invalidArgument("an ensemble needs at least one model");
  if (!weights.empty() && weights.size() != models.size())
    return tfmrt::invalidArgument(std::to_string(weights.size()) + " ensemble weights for " + std::to_string(models.size()) +
                                  " models");
  std::vector<double> w(models.size(), 1.0);
  double total = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!(weights[i] > 0 && weights[i] <= 1e30))
      return tfmrt::invalidArgument("ensemble weight " + std::to_string(i + 1) + " must be positive and finite, got " +
                                    std::to_string(weights[i]));
    w[i] = weights[i];
  }
  for (double x : w) total += x;
  for (double &x : w) x /= total;
  std::unique_ptr<Translator> t;
  TFMRT_RETURN_IF_ERROR(create(*models[0], o, t));
  if (models.size() > 1) {
    std::vector<std::unique_ptr<Decoder>> members(models.size());
    members[0] = std::move(t->decoder_);
    SearchOptions others = o;  // the alignment is the first model's
    others.alignment = false;
    for (size_t i = 1; i < models.size(); ++i) TFMRT_RETURN_IF_ERROR(makeDecoder(*models[i], others, members[i]));
    t->decoder_ = std::make_unique<EnsembleDecoder>(std::move(members), w, t->threads_);
  }
  out = std::move(t);
  return Status::OK();
}

Status Translator::translateForced(const std::vector<std::vector<int32_t>> &sources,
                                   const std::vector<std::vector<int32_t>> &given, bool whole,
                                   std::vector<std::vector<Hypothesis>> &out, const std::vector<uint64_t> *sentenceIds,
                                   const std::function<void(size_t)> &progress) {
  const char *what = whole ? "target" : "prefix", *whats = whole ? "targets" : "prefixes";
  if (given.size() != sources.size())
    return tfmrt::invalidArgument(std::to_string(sources.size()) + " sources but " + std::to_string(given.size()) + " " +
                                  whats);
  if (sentenceIds && sentenceIds->size() != sources.size())
    return tfmrt::invalidArgument("one sentence id per source is needed");
  // What is wrong with sentence i's tokens, named as line `line`.
  auto check = [&](size_t i, uint64_t line) -> Status {
    const std::string which = what + (" " + std::to_string(line));
    for (int32_t id : given[i])
      if (id < 0 || id == options_.pad || id == options_.bos || id == options_.eos)
        return tfmrt::invalidArgument(which + " holds id " + std::to_string(id) +
                                      ": padding, BOS, </s> and negative ids are not tokens to force");
    if (int64_t(given[i].size()) > options_.maxLen - 2)
      return tfmrt::invalidArgument(which + " has " + std::to_string(given[i].size()) + " tokens; with BOS and </s> the model's max_len (" +
                                    std::to_string(options_.maxLen) + ") allows " + std::to_string(options_.maxLen - 2));
    return Status::OK();
  };
  // The first offending line in the caller's numbering: the sentences come sorted by length, and
  // "prefix 2" was named when every line was too long.
  Status invalid = Status::OK();
  uint64_t invalidLine = UINT64_MAX;
  for (size_t i = 0; i < given.size(); ++i) {
    const uint64_t line = sentenceIds ? (*sentenceIds)[i] + 1 : i + 1;
    if (line >= invalidLine) continue;
    if (Status s = check(i, line); !s.ok()) {
      invalid = std::move(s);
      invalidLine = line;
    }
  }
  if (!invalid.ok()) return invalid;
  forced_ = &given;
  forcedWhole_ = whole;
  Status s = translate(sources, out, sentenceIds, progress);
  forced_ = nullptr;
  return s;
}

Status Translator::score(const std::vector<std::vector<int32_t>> &sources, const std::vector<std::vector<int32_t>> &targets,
                         std::vector<std::vector<Hypothesis>> &out, const std::vector<uint64_t> *sentenceIds,
                         const std::function<void(size_t)> &progress) {
  return translateForced(sources, targets, /*whole=*/true, out, sentenceIds, progress);
}

Status Translator::translateWithPrefixes(const std::vector<std::vector<int32_t>> &sources,
                                         const std::vector<std::vector<int32_t>> &prefixes,
                                         std::vector<std::vector<Hypothesis>> &out, const std::vector<uint64_t> *sentenceIds,
                                         const std::function<void(size_t)> &progress) {
  return translateForced(sources, prefixes, /*whole=*/false, out, sentenceIds, progress);
}

Status Translator::translate(const std::vector<std::vector<int32_t>> &sources, std::vector<std::vector<Hypothesis>> &out,
                             const std::vector<uint64_t> *sentenceIds, const std::function<void(size_t)> &progress) {
  // A wide beam's candidates and hypotheses live in the search's own vectors, not in the session:
  // running out of memory there is an error for the caller, not an abort.
  try {
    Status s = search(sources, out, sentenceIds, progress);
    // Where the memory ran out depends on what else holds it (other workers' caches): an entry's
    // arena names no option, so the hint is added here.
    if (s.code() == tfmrt::StatusCode::ResourceExhausted && s.message().find("(lower --") == std::string::npos)
      return Status(s.code(), s.message() + " (lower --batch or --beam, or --workers)");
    return s;
  } catch (const std::bad_alloc &) {
    return tfmrt::outOfMemory("out of memory in the search: a beam of " + std::to_string(options_.beam) + " over " +
                                std::to_string(sources.size()) + " sentence(s) (lower --beam or --batch)");
  }
}

Status Translator::search(const std::vector<std::vector<int32_t>> &sources, std::vector<std::vector<Hypothesis>> &out,
                          const std::vector<uint64_t> *sentenceIds, const std::function<void(size_t)> &progress) {
  const SearchOptions &o = options_;
  const int64_t N = int64_t(sources.size());
  // Tokens given per sentence (score()'s targets, translateWithPrefixes()'s prefixes): while a
  // sentence is inside them, its one hypothesis takes the given token.
  const std::vector<std::vector<int32_t>> *forced = forced_;
  const bool scoring = forced && forcedWhole_;
  auto givenAt = [&](int64_t n, int64_t t) {
    return forced && t < int64_t((*forced)[size_t(n)].size()) ? (*forced)[size_t(n)][size_t(t)] : -1;
  };
  SharedSentences *const shared = shared_;
  if (!shared) out.assign(size_t(N), {});
  else if (out.size() != size_t(N)) return tfmrt::invalidArgument("shared sentences need their results sized to them");
  if (N == 0) return Status::OK();
  if (sentenceIds && sentenceIds->size() != sources.size())
    return tfmrt::invalidArgument("one sentence id per source is needed");
  const int K = scoring ? 1 : o.beam;
  const bool greedy = K == 1;
  const bool continuous = decoder_->continuous();

  // Sources with EOS, truncated to max_len (no padding yet: batches are padded as admitted).
  std::vector<std::vector<int32_t>> srcIds(static_cast<size_t>(N));
  std::vector<SentenceState> state(static_cast<size_t>(N));
  int64_t maxSource = 1, maxSteps = 1;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t len = std::min<int64_t>(int64_t(sources[n].size()), o.maxLen - 1);
    srcIds[n].assign(sources[n].begin(), sources[n].begin() + len);
    srcIds[n].push_back(o.eos);
    maxSource = std::max<int64_t>(maxSource, len + 1);
    state[n].maxOut = outputLengthLimit(o, len);
    if (forced) {  // room for every given token and </s> (<= max_len - 1: checked)
      const int64_t given = int64_t((*forced)[size_t(n)].size()) + 1;
      state[n].maxOut = scoring ? given : std::max(state[n].maxOut, given);
    }
    maxSteps = std::max(maxSteps, state[n].maxOut);
  }
  // Slots: sentences decoded together. Continuous batching refills a slot as soon as its
  // sentence finishes (in groups, so `encode` runs on several sentences at once), so the rows
  // of decode_step stay near slots x beam instead of shrinking as a batch's sentences finish.
  const int64_t slots = o.maxSentences > 0 ? std::min(o.maxSentences, N) : N;
  // Refill when an eighth of the slots is free: measured on test_2016 (small, batch 32, thresholds
  // 1, 4, 8, 16, 32 slots, 3 rounds each) the differences were within the machine's noise.
  const int64_t refillAt = continuous ? std::max<int64_t>(1, slots / 8) : slots;
  TFMRT_RETURN_IF_ERROR(decoder_->reserve(slots, maxSource, slots * K, maxSteps));
  std::vector<int32_t> freeSlots(static_cast<size_t>(slots));
  std::iota(freeSlots.rbegin(), freeSlots.rend(), 0);  // popped from the back: lowest first
  std::vector<int64_t> inFlight;                       // sentences being decoded, in admission order
  std::vector<int32_t> slotOf(static_cast<size_t>(N), -1);
  int64_t nextSentence = 0, finishedCount = 0, inFlightLongest = 0;
  int64_t blockFirst = 0, blockEnd = 0;  // the encoded block: sentences [blockFirst, blockEnd)
  const int64_t encodeBudget = o.encodeBlockTokens;
  // The next block from `first`: as many sentences as fit the encoder's budget in padded
  // positions (sentences x longest; at least one; also within maxSourceTokens when set); its end
  // and its width (longest source).
  auto blockFrom = [&](int64_t first) {
    const int64_t budget = o.maxSourceTokens > 0 ? std::min(encodeBudget, o.maxSourceTokens) : encodeBudget;
    // Shared: a guided share of what is left. Whole budget-sized blocks let one translator claim
    // the last ~128 short sentences while the other ran dry (they finished 0.02-0.2 s apart).
    const int64_t limit =
        shared ? first + std::max<int64_t>(1, (N - first) / (2 * std::max<int64_t>(1, shared->translators))) : N;
    int64_t S = 0, end = first;
    while (end < limit) {
      const int64_t wider = std::max<int64_t>(S, int64_t(srcIds[size_t(end)].size()));
      if (end > first && (end - first + 1) * wider > budget) break;
      S = wider;
      ++end;
    }
    return std::pair<int64_t, int64_t>{end, S};
  };
  bool claimedAll = false;  // shared: no sentence left to claim
  auto more = [&] { return nextSentence < blockEnd || (shared ? !claimedAll : nextSentence < N); };

  std::vector<int32_t> rowSlot, parents, positions, blockRows, lengths, admittedSlots;
  std::vector<const std::vector<int32_t> *> prefixes;
  std::vector<uint8_t> taken, rowForced;  // rowForced: its token is given (no search over the row)
  std::vector<RowTop> tops;
  std::vector<int32_t> batchIds;
  const size_t keep = greedy ? 1 : size_t(2 * K);
  for (;;) {
    // Admission: into free slots, a group at a time, the caller's order; with a source-token
    // limit, as many as keep (sentences x longest) within it (at least one). Sources are encoded
    // ahead in blocks of up to encodeBlockTokens padded positions, independent of the slots; a
    // group that reaches the end of a block continues in the next one.
    if (more() && (inFlight.empty() || int64_t(freeSlots.size()) >= refillAt)) {
      int64_t longest = inFlightLongest;
      bool limited = false;
      while (!limited && more() && !freeSlots.empty()) {
        if (nextSentence >= blockEnd) {
          // Sentences come longest first from `tfmc translate`, but any order is handled: the
          // block is padded to its longest source.
          std::pair<int64_t, int64_t> block{N, 0};
          if (shared) {  // claim the next block of the shared sentences
            std::lock_guard<std::mutex> lock(shared->mutex);
            nextSentence = shared->next;
            if (nextSentence < N) block = blockFrom(nextSentence);
            shared->next = block.first;
          } else {
            block = blockFrom(nextSentence);
          }
          const auto [end, S] = block;
          if (nextSentence >= end) {  // shared, and nothing left
            claimedAll = true;
            break;
          }
          blockFirst = nextSentence;
          blockEnd = end;
          batchIds.assign(size_t((end - blockFirst) * S), o.pad);
          for (int64_t n = blockFirst; n < end; ++n)
            std::copy(srcIds[size_t(n)].begin(), srcIds[size_t(n)].end(), batchIds.begin() + (n - blockFirst) * S);
          const auto t0 = Clock::now();
          TFMRT_RETURN_IF_ERROR(decoder_->encode(Tensor::i32({end - blockFirst, S}, batchIds)));
          const double encodeSeconds = secondsSince(t0);
          work_.admitSeconds += encodeSeconds;
          work_.encodeSeconds += encodeSeconds;
          work_.encodedPositions += (end - blockFirst) * S;
          ++work_.encodeCalls;
        }
        blockRows.clear();
        lengths.clear();
        admittedSlots.clear();
        while (nextSentence < blockEnd && !freeSlots.empty()) {
          const int64_t n = nextSentence, len = int64_t(srcIds[size_t(n)].size());
          const int64_t count = int64_t(inFlight.size()) + 1;
          if (o.maxSourceTokens > 0 && count > 1 && count * std::max(longest, len) > o.maxSourceTokens) {
            limited = true;
            break;
          }
          longest = std::max(longest, len);
          slotOf[size_t(n)] = freeSlots.back();
          freeSlots.pop_back();
          blockRows.push_back(int32_t(n - blockFirst));
          lengths.push_back(int32_t(len));
          admittedSlots.push_back(slotOf[size_t(n)]);
          Live root;
          root.row = -1;  // no cache row yet
          state[size_t(n)].live.push_back(std::move(root));
          inFlight.push_back(n);
          ++nextSentence;
        }
        if (blockRows.empty()) break;
        const auto t0 = Clock::now();
        TFMRT_RETURN_IF_ERROR(decoder_->admit(blockRows, lengths, admittedSlots));
        const double copySeconds = secondsSince(t0);
        work_.admitSeconds += copySeconds;
        work_.copySeconds += copySeconds;
      }
      inFlightLongest = longest;
    }
    if (inFlight.empty()) break;

    // Rows of this call. A hypothesis keeps its parent's row when that row is free and < R:
    // the K/V cache reorder copies only rows whose parent differs, so the first child of each
    // parent, and every hypothesis of a sentence when others leave the batch, costs no copy.
    // Row placement does not change any row's results (every kernel treats rows alike).
    int64_t R = 0;
    for (int64_t n : inFlight) R += int64_t(state[size_t(n)].live.size());
    rowSlot.assign(size_t(R), 0);
    parents.assign(size_t(R), 0);
    positions.assign(size_t(R), 0);
    prefixes.assign(size_t(R), nullptr);
    taken.assign(size_t(R), 0);
    rowForced.assign(size_t(R), 0);
    for (int pass = 0, next = 0; pass < 2; ++pass)
      for (int64_t n : inFlight) {
        for (Live &h : state[size_t(n)].live) {
          if (pass == 0) {
            h.callRow = -1;
            if (h.row < 0 || h.row >= R || taken[size_t(h.row)]) continue;
            h.callRow = h.row;
          } else {
            if (h.callRow >= 0) continue;
            while (taken[size_t(next)]) ++next;
            h.callRow = next;
          }
          const size_t r = size_t(h.callRow);
          taken[r] = 1;
          rowSlot[r] = slotOf[size_t(n)];
          parents[r] = h.row < 0 ? h.callRow : h.row;  // a new sentence's row has nothing to copy
          positions[r] = int32_t(h.tokens.size());
          prefixes[r] = &h.tokens;
          rowForced[r] = scoring || givenAt(n, int64_t(h.tokens.size())) >= 0;
        }
      }
    const Tensor *logits = nullptr;
    const auto stepStart = Clock::now();
    TFMRT_RETURN_IF_ERROR(decoder_->step(positions, rowSlot, parents, prefixes, logits));
    const auto searchStart = Clock::now();
    work_.stepSeconds += std::chrono::duration<double>(searchStart - stepStart).count();
    ++steps_;
    work_.rows += R;
    if (decoder_->normalised()) {  // decode_step: one position per row
      work_.decoderPositions += R;
    } else {  // decode: every row's whole prefix, and its memory re-projected
      work_.decoderPositions += R * (int64_t(positions[0]) + 1);
      work_.memoryPositions += R * inFlightLongest;  // the memory is as long as the longest source in flight
    }
    const int64_t V = logits->shape.back();
    if (logits->numel() != R * V) return tfmrt::internalError("decoder returned logits of an unexpected shape");
    const Tensor *align = o.alignment ? decoder_->alignment() : nullptr;
    if (o.alignment && (!align || align->dtype != tfmrt::DType::F32 || align->shape.size() != 3 ||
                        align->shape[0] != R || align->shape[1] != 1 || align->shape[2] < inFlightLongest))
      return tfmrt::internalError("decoder returned attention weights of an unexpected shape");
    // Appends row r's weights over sentence n's source pieces and </s> to `rows`.
    auto appendRow = [&](std::vector<float> &rows, int64_t r, int64_t n) {
      const float *w = align->data<float>() + r * align->shape[2];
      rows.insert(rows.end(), w, w + srcIds[size_t(n)].size());
    };
    if (V < 3) return tfmrt::invalidArgument("the target vocabulary needs more than padding and BOS to search over");
    tops.resize(size_t(R));
    if (banned_.size() < size_t(R)) banned_.resize(size_t(R));
    const bool normalised = decoder_->normalised();
    const size_t rowKeep = std::min<size_t>(keep, size_t(V) - 2);
    // An exception may not leave an OpenMP region (it would abort): a row that runs out of
    // memory is rethrown after it, for translate() to report.
    bool outOfMemory = false;
#pragma omp parallel for schedule(static) num_threads(threads_) if (R * V >= (1 << 16))
    for (int64_t r = 0; r < R; ++r) {
      if (rowForced[size_t(r)]) {  // only the normaliser: the token is given
        tops[r].best.clear();
        const float *z = logits->data<float>() + r * V;
        tops[r].lse = normalised ? 0.0 : rowLogSumExp(z, V);
        continue;
      }
      try {
        bannedTokens(o, *prefixes[size_t(r)], banned_[size_t(r)]);
        scoreRow(logits->data<float>() + r * V, V, o.sample ? 1 : rowKeep, banned_[size_t(r)], o.eos, normalised,
                 tops[r]);
      } catch (const std::bad_alloc &) {
#pragma omp atomic write
        outOfMemory = true;
      }
    }
    if (outOfMemory) throw std::bad_alloc();

    for (int64_t n : inFlight) {
      SentenceState &st = state[size_t(n)];
      const int nLive = int(st.live.size());
      const int64_t t = int64_t(st.live[0].tokens.size());  // this sentence's position
      const bool lastStep = t + 1 >= st.maxOut;             // this token is the last one allowed
      // The length under the penalty counts EOS, also for outputs cut at the length limit.
      // `eos`: it ends in </s> (logProb includes it); else it was cut at the length limit.
      auto finish = [&](const Live &h, double logProb, bool eos) {
        Hypothesis f;
        f.tokens = h.tokens;
        f.tokenLogProbs = h.tokenLogProbs;
        if (eos) f.tokenLogProbs.push_back(logProb - h.logProb);
        if (align) {  // one row per token from the flat buffer, then </s>'s
          const size_t width = srcIds[size_t(n)].size();
          for (size_t at = 0; at < h.alignment.size(); at += width)
            f.alignment.emplace_back(h.alignment.begin() + long(at), h.alignment.begin() + long(at + width));
          if (eos) appendRow(f.alignment.emplace_back(), h.callRow, n);
        }
        f.logProb = logProb;
        f.score = logProb / lengthPenalty(f.tokens.size() + 1, o.lengthPenalty);
        st.finished.push_back(std::move(f));
      };
      const int32_t given = givenAt(n, t);
      if (given >= V)
        return tfmrt::invalidArgument(std::string(scoring ? "target " : "prefix ") +
                                      std::to_string(sentenceIds ? (*sentenceIds)[size_t(n)] + 1 : uint64_t(n) + 1) +
                                      " holds id " + std::to_string(given) + ", outside the target vocabulary of " +
                                      std::to_string(V));
      if (greedy || given >= 0) {  // one hypothesis: greedy, or a given token (any beam)
        const int64_t r = st.live[0].callRow;
        const float *z = logits->data<float>() + r * V;
        int32_t token;
        if (given >= 0) token = given;
        else if (scoring) token = o.eos;
        else if (o.sample) token = sampleToken(z, V, banned_[size_t(r)], n, t, sentenceIds, 0);
        else token = tops[r].best[0].second;
        const double logProb = st.live[0].logProb + double(z[token]) - tops[r].lse;
        if (token == o.eos) {
          finish(st.live[0], logProb, true);
          st.live.clear();
        } else {
          st.live[0].tokens.push_back(token);
          st.live[0].tokenLogProbs.push_back(logProb - st.live[0].logProb);
          if (align) appendRow(st.live[0].alignment, r, n);
          st.live[0].logProb = logProb;
          st.live[0].row = int32_t(r);
          if (lastStep) {
            finish(st.live[0], logProb, false);
            st.live.clear();
          }
        }
        st.done = st.live.empty();
        continue;
      }
      if (o.sample) {
        // Sampling with beam K (fairseq's --sampling --beam K): K independent samples per
        // sentence, drawn from its start hypothesis at the first step, then each from its own
        // prefix; sample k's draws are keyed by k (sample 0's are beam 1's), so no sample
        // depends on the others, the batch or the threads. The sentence is done when all ended.
        std::vector<Live> next;
        for (const Live &h : st.live) {
          const int64_t r = h.callRow;
          const float *z = logits->data<float>() + r * V;
          for (int k = 0; k < (st.spawned ? 1 : K); ++k) {
            const int32_t sample = st.spawned ? h.sample : k;
            const int32_t token = sampleToken(z, V, banned_[size_t(r)], n, t, sentenceIds, sample);
            const double logProb = h.logProb + double(z[token]) - tops[r].lse;
            if (token == o.eos) {
              finish(h, logProb, true);
              continue;
            }
            Live c;
            c.tokens = h.tokens;
            c.tokens.push_back(token);
            c.tokenLogProbs = h.tokenLogProbs;
            c.tokenLogProbs.push_back(logProb - h.logProb);
            if (align) {
              c.alignment = h.alignment;
              appendRow(c.alignment, r, n);
            }
            c.logProb = logProb;
            c.row = int32_t(r);
            c.sample = sample;
            if (lastStep) finish(c, logProb, false);
            else next.push_back(std::move(c));
          }
        }
        st.spawned = true;
        st.live.swap(next);
        st.done = st.live.empty();
        continue;
      }
      // Beam: the best 2K extensions of the sentence's live hypotheses.
      // Merged from the hypotheses' rows (each sorted): best first, ties in (j, rank) order, as a
      // stable sort of all K x 2K would give them, in O(K log K) rather than O(K^2 log K) (beam
      // 1000: seconds per sentence).
      cand_.clear();
      heads_.clear();
      auto candidate = [&](int j, int rank) {
        const RowTop &top = tops[size_t(st.live[j].callRow)];
        const auto &[z, token] = top.best[size_t(rank)];
        return Candidate{st.live[j].logProb + double(z) - top.lse, j, token, rank};
      };
      // Heap order: the best candidate on top; of equal ones the lower j.
      auto below = [](const Candidate &a, const Candidate &b) {
        return a.logProb < b.logProb || (a.logProb == b.logProb && a.j > b.j);
      };
      for (int j = 0; j < nLive; ++j)
        if (!tops[size_t(st.live[j].callRow)].best.empty()) heads_.push_back(candidate(j, 0));
      std::make_heap(heads_.begin(), heads_.end(), below);
      while (!heads_.empty() && cand_.size() < size_t(2 * K)) {
        std::pop_heap(heads_.begin(), heads_.end(), below);
        const Candidate c = heads_.back();
        heads_.pop_back();
        cand_.push_back(c);
        if (size_t(c.rank + 1) < tops[size_t(st.live[c.j].callRow)].best.size()) {
          heads_.push_back(candidate(c.j, c.rank + 1));
          std::push_heap(heads_.begin(), heads_.end(), below);
        }
      }
      std::vector<Live> next;
      for (size_t i = 0; i < cand_.size(); ++i) {
        const Candidate &c = cand_[i];
        if (c.token == o.eos) {
          // End of sentence only from the top K: a lower-ranked EOS does not end a hypothesis
          // (or the sentence) that K live extensions beat.
          if (int(i) < K) finish(st.live[c.j], c.logProb, true);
          continue;
        }
        if (int(next.size()) >= K) continue;
        Live h;
        h.tokens = st.live[c.j].tokens;
        h.tokens.push_back(c.token);
        h.tokenLogProbs = st.live[c.j].tokenLogProbs;
        h.tokenLogProbs.push_back(c.logProb - st.live[c.j].logProb);
        if (align) {
          h.alignment = st.live[c.j].alignment;
          appendRow(h.alignment, st.live[c.j].callRow, n);
        }
        h.logProb = c.logProb;
        h.row = st.live[c.j].callRow;
        next.push_back(std::move(h));
      }
      if (lastStep) {
        for (const Live &h : next) finish(h, h.logProb, false);
        next.clear();
      }
      st.live.swap(next);
      // Done when nBest hypotheses are finished and no live one can still beat the nBest-th
      // best finished score: a live log-probability only falls and the penalty only grows with
      // length, so its best possible final score is logProb / lp(maxOut + 1) (an output cut at
      // the limit has maxOut tokens and is scored as if </s> followed). Hypotheses finished
      // later score at most that (ties rank after), so the nBest are final: waiting for K
      // finished, as before, gave the same output after 1 % more rows (test_2016, beam 4).
      bool done = st.live.empty();
      if (!done && int(st.finished.size()) >= o.nBest) {
        scores_.clear();
        for (const Hypothesis &f : st.finished) scores_.push_back(f.score);
        std::nth_element(scores_.begin(), scores_.begin() + (o.nBest - 1), scores_.end(), std::greater<double>());
        const double nth = scores_[size_t(o.nBest - 1)];
        double bound = -std::numeric_limits<double>::infinity();
        for (const Live &h : st.live)
          bound = std::max(bound, h.logProb / lengthPenalty(size_t(st.maxOut) + 1, o.lengthPenalty));
        done = nth >= bound;
      }
      st.done = done;
    }
    // Finished sentences leave: their slots are free for the next admission.
    size_t kept = 0;
    for (int64_t n : inFlight) {
      SentenceState &st = state[size_t(n)];
      if (!st.done) {
        inFlight[kept++] = n;
        continue;
      }
      st.live.clear();
      freeSlots.push_back(slotOf[size_t(n)]);
      auto &f = st.finished;
      std::stable_sort(f.begin(), f.end(), [](const Hypothesis &a, const Hypothesis &b) { return a.score > b.score; });
      if (f.size() > size_t(o.nBest)) f.resize(size_t(o.nBest));
      out[size_t(n)] = std::move(f);
      ++finishedCount;
    }
    work_.searchSeconds += secondsSince(searchStart);
    if (kept != inFlight.size()) {
      inFlight.resize(kept);
      // Lowest free slot first, so a non-continuous decoder's slots match its batch rows.
      std::sort(freeSlots.begin(), freeSlots.end(), std::greater<int32_t>());
      inFlightLongest = 0;
      for (int64_t n : inFlight) inFlightLongest = std::max<int64_t>(inFlightLongest, int64_t(srcIds[size_t(n)].size()));
      if (progress) progress(size_t(finishedCount));
    }
  }
  return Status::OK();
}

int32_t Translator::sampleToken(const float *z, int64_t V, const std::vector<int32_t> &banned, int64_t sentence,
                                int64_t position, const std::vector<uint64_t> *sentenceIds, int32_t sample) {
  const SearchOptions &o = options_;
  // The allowed tokens, in id order.
  candidates_.resize(size_t(V));
  std::iota(candidates_.begin(), candidates_.end(), 0);
  candidates_.erase(std::remove_if(candidates_.begin(), candidates_.end(),
                                   [&](int32_t v) { return std::binary_search(banned.begin(), banned.end(), v); }),
                    candidates_.end());
  if (candidates_.empty()) return o.eos;  // every token banned: end the sentence
  // Which tokens are kept (top-k, then top-p) depends on the probability order (ties: lower id);
  // the draw then walks the kept ones in id order, so two tokens of (nearly) equal probability that
  // trade places under rounding -- cached vs full prefix, one kernel vs another -- cannot change
  // the sample. `last` is the least likely kept token (-1: all are kept).
  auto higher = [&](int32_t a, int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };
  int32_t last = -1;
  double mx = -std::numeric_limits<double>::infinity();
  const size_t k = o.topK > 0 ? std::min<size_t>(size_t(o.topK), candidates_.size()) : candidates_.size();
  if (k < candidates_.size() || o.topP < 1) {
    order_ = candidates_;
    std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), higher);
    mx = double(z[order_[0]]);
    size_t n = k;
    if (o.topP < 1) {
      probs_.resize(k);
      double sum = 0;
      for (size_t i = 0; i < k; ++i) sum += probs_[i] = std::exp((double(z[order_[i]]) - mx) / o.temperature);
      double mass = 0;
      for (size_t i = 0; i < k; ++i) {
        mass += probs_[i] / sum;
        if (mass >= o.topP) {
          n = i + 1;
          break;
        }
      }
    }
    if (n < candidates_.size()) last = order_[n - 1];
  } else {
    for (int32_t v : candidates_) mx = std::max(mx, double(z[v]));
  }
  probs_.assign(candidates_.size(), 0.0);
  double total = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const int32_t v = candidates_[i];
    if (last < 0 || v == last || higher(v, last)) total += probs_[i] = std::exp((double(z[v]) - mx) / o.temperature);
  }
  const uint64_t id = sentenceIds ? (*sentenceIds)[size_t(sentence)] : uint64_t(sentence);
  double u = uniformDraw(sample == 0 ? o.seed : splitmix64(o.seed + uint64_t(sample)), id, position) * total;
  int32_t lastKept = candidates_[0];
  for (size_t i = 0; i < candidates_.size(); ++i) {
    if (probs_[i] == 0) continue;
    lastKept = candidates_[i];
    u -= probs_[i];
    if (u < 0) return lastKept;
  }
  return lastKept;  // u at the very top of the range (rounding)
}

Status translateBatch(tfmrt::Model &model, const std::vector<std::vector<int32_t>> &sources, const SearchOptions &options,
                      std::vector<std::vector<int32_t>> &outputs) {
  std::unique_ptr<Translator> translator;
  TFMRT_RETURN_IF_ERROR(Translator::create(model, options, translator));
  std::vector<std::vector<Hypothesis>> hyps;
  TFMRT_RETURN_IF_ERROR(translator->translate(sources, hyps));
  outputs.assign(sources.size(), {});
  for (size_t i = 0; i < hyps.size(); ++i)
    if (!hyps[i].empty()) outputs[i] = std::move(hyps[i][0].tokens);
  return Status::OK();
}

}  // namespace tfmdata
