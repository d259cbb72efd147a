// Translation search over a compiled model's translation entries (--entries=...,translate):
// greedy (argmax), beam search with the GNMT length penalty, and sampling, batched over sentences.
//
// Two decoders produce the next-token scores. The default runs `encode` once per sentence and
// then `decode_step` once per output position: one new token per hypothesis, its keys and values
// appended to a K/V cache held as session state (reordered in place when beams are re-ranked).
// Its batching is continuous: up to maxSentences sentences sit in slots, and a finished
// sentence's slot is refilled from the rest, each row at its own position.
// The reference decoder (`useCache = false`) runs `decode` over the whole target prefix at every
// step; both give the same log-probabilities (tested to 1e-5), so they find the same outputs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "tfmdata/decoding_limits.h"
#include "tfmrt/runtime.h"

namespace tfmdata {

// The hypotheses `tfmc translate` keeps in flight by default (--batch = this / beam sentences):
// the cached decoder's step products have one row per hypothesis, and the few-rows GEMM runs
// near its large-M rate only from ~128 rows. test_2016, small, 2-core Zen 3, greedy, 4
// alternating rounds: 32 / 64 / 128 / 256 sentences in 3.00 / 2.66 / 2.49 / 2.78 s (median);
// beam 4 at 32 / 64 sentences (128 / 256 rows): 6.80 / 6.69 s.
constexpr int64_t kDefaultHypothesesInFlight = 128;
inline int64_t defaultSentencesInFlight(int beam) {
  return beam > 1 ? (kDefaultHypothesesInFlight + beam - 1) / beam : kDefaultHypothesesInFlight;
}

struct SearchOptions {
  int beam = 4;                 // 1: greedy (or sampling)
  double lengthPenalty = 0.6;   // GNMT: score = log P / ((5 + length) / 6)^lengthPenalty, length with EOS
  double maxLengthRatio = 1.5;  // output length (EOS included) <= ratio * source length + offset
  int64_t maxLengthOffset = 10;
  int64_t maxLen = 128;  // the model's max_len: no sequence (incl. BOS/EOS) may exceed it
  int32_t pad = 0, bos = 1, eos = 2;  // pad and bos are never generated
  bool useCache = true;  // decode_step + K/V cache; false: the full-prefix `decode` reference path
  int nBest = 1;         // hypotheses kept per sentence, best first (<= beam)
  // Constraints on every search mode (as fairseq's --min-len and --no-repeat-ngram-size): no </s>
  // before minLength output tokens (an output cut at the length limit may still be shorter),
  // and no token that would repeat an n-gram of this size already in the hypothesis (0: off).
  // Banned tokens are dropped after normalisation, as if their log-probability were -inf; where
  // the constraints together ban every token (n-grams of size 1 over a tiny vocabulary), </s>
  // ends the hypothesis.
  int64_t minLength = 0;
  int noRepeatNgram = 0;
  // Sentences decoded together (0: all those given to translate). With the cached decoder a
  // finished sentence's slot is refilled from the rest (continuous batching); the full-prefix
  // decoder takes them a batch at a time.
  int64_t maxSentences = 0;
  // With it, admission keeps sentences x longest source (EOS included) within this many tokens
  // (0: no limit; at least one sentence).
  int64_t maxSourceTokens = 0;
  // Sources are encoded ahead in blocks of up to this many padded positions (sentences x longest,
  // at least one sentence; also within maxSourceTokens when that is set), so the encoder's
  // products have many rows however few slots are free at a time. On test_2016 (greedy, small,
  // longest first), 512-2048 encoded in 0.84-0.94 s where refill groups took 1.31 s; 4096 padded
  // 17 % more positions than 1024's 3 %.
  int64_t encodeBlockTokens = 1024;
  // Sampling: draw each token from softmax(logits / temperature) restricted to the topK most
  // likely tokens (0: all) and to the smallest set whose probability reaches topP. With beam K,
  // K independent samples per sentence (fairseq's --sampling --beam K), ranked by score for
  // nBest. Draws depend only on (seed, sentence id, position, sample index), not on batching or
  // threads; sample 0 is the beam-1 sample.
  bool sample = false;
  double temperature = 1.0;
  int topK = 0;
  double topP = 1.0;
  uint64_t seed = 0;
  // Word alignment (Marian's --alignment, fairseq's --print-alignment): every hypothesis also
  // carries, per output token (</s> included when emitted), the head-averaged cross-attention
  // weights of the last decoder layer over the source pieces (</s> included). Needs the cached
  // decoder and an artifact compiled with --entries=...,translate,alignment; in an ensemble, the
  // first model's weights.
  bool alignment = false;
};

// The most output tokens (before </s>) the search gives a source of `sourceTokens` tokens (EOS not
// counted): max_length_ratio x source + offset, within [1, max_len - 1] (forced tokens may extend it).
inline int64_t outputLengthLimit(const SearchOptions &o, int64_t sourceTokens) {
  const int64_t len = std::min<int64_t>(sourceTokens, o.maxLen - 1);
  return std::max<int64_t>(1, std::min<int64_t>(o.maxLen - 1, int64_t(o.maxLengthRatio * double(len)) + o.maxLengthOffset));
}

struct Hypothesis {
  std::vector<int32_t> tokens;  // output ids, no BOS/EOS
  // Each token's log-probability given the source and the tokens before it, then </s>'s when it
  // was emitted (not for an output cut at the length limit): fairseq's positional scores,
  // Marian's word scores. Under an ensemble, the mixture's.
  std::vector<double> tokenLogProbs;
  double logProb = 0;           // sum of the tokens' log-probabilities (EOS included when emitted)
  double score = 0;             // logProb under the length penalty: what the search ranks by
  // With SearchOptions::alignment: per entry of tokenLogProbs, the token's attention weights over
  // the source pieces and the source's </s> (each row sums to 1); else empty.
  std::vector<std::vector<float>> alignment;
};

// Holds a Session of the model (arenas, plans, the K/V cache) across batches, so the runtime
// allocates nothing once the largest batch has been seen (the search's own bookkeeping still
// allocates small vectors per step). Not for concurrent use; create one per thread: Translators
// of one Model on several threads decode at the same time.
class Translator {
public:
  ~Translator();
  static tfmrt::Status create(tfmrt::Model &model, const SearchOptions &options, std::unique_ptr<Translator> &out);
  // An ensemble (fairseq's and Marian's, of checkpoints or of separately trained models): every
  // model decodes every hypothesis with its own session, and the search ranks the mixture of
  // their next-token distributions, log sum_i w_i p_i(token | prefix, source) (weights
  // normalised to sum 1; empty: equal). The models must share the target vocabulary and the
  // special ids (options.pad/bos/eos); each runs its own encoder and K/V cache, so time and
  // memory grow with their number. One model with any weight is exactly create(model, ...).
  static tfmrt::Status create(const std::vector<tfmrt::Model *> &models, const std::vector<double> &weights,
                              const SearchOptions &options, std::unique_ptr<Translator> &out);
  // Source subword ids (no EOS: the search appends it) -> per sentence, up to nBest hypotheses,
  // best first. `sentenceIds` (optional, one per source) key the sampling draws; default: the
  // position in `sources`.
  // `progress` (optional) is called with the number of sentences finished so far.
  tfmrt::Status translate(const std::vector<std::vector<int32_t>> &sources, std::vector<std::vector<Hypothesis>> &out,
                          const std::vector<uint64_t> *sentenceIds = nullptr,
                          const std::function<void(size_t)> &progress = {});
  // The same, each output starting with the given target prefix (CTranslate2's target_prefix,
  // Marian's --force-decode; ids without BOS, may be empty): the prefix is forced token by token
  // (one hypothesis per sentence while it lasts, whatever the beam; the search's constraints do
  // not apply to it), then the search continues. Outputs and scores include the prefix. A prefix
  // longer than maxLen - 2 tokens is refused; the length limit is at least prefix + 1.
  tfmrt::Status translateWithPrefixes(const std::vector<std::vector<int32_t>> &sources,
                                      const std::vector<std::vector<int32_t>> &prefixes,
                                      std::vector<std::vector<Hypothesis>> &out,
                                      const std::vector<uint64_t> *sentenceIds = nullptr,
                                      const std::function<void(size_t)> &progress = {});
  // Forced decoding (fairseq-generate's --score-reference, Marian's scorer): the log-probability
  // of each target (ids without BOS/EOS; </s> is scored after them) given its source, from the
  // decoder and kernels the search uses, batched the same way. out[i]: one hypothesis holding the
  // target, its logProb (</s> included) and score (under the length penalty). No search option
  // applies (beam, constraints, sampling). A target longer than maxLen - 2 tokens is refused: as
  // in the search, no sequence with BOS and </s> may exceed max_len. Errors name a target by its
  // sentence id + 1 (`sentenceIds`, one per source; default: its position).
  tfmrt::Status score(const std::vector<std::vector<int32_t>> &sources, const std::vector<std::vector<int32_t>> &targets,
                      std::vector<std::vector<Hypothesis>> &out, const std::vector<uint64_t> *sentenceIds = nullptr,
                      const std::function<void(size_t)> &progress = {});
  const SearchOptions &options() const { return options_; }
  // Several translators (of one model, on their own threads: tfmc translate --workers) sharing
  // one call's sentences: each is given all of them (the same sources, ids, forced tokens and a
  // result vector already sized to them), and claims the next block of sentences whenever it
  // encodes, so each keeps its own continuous batching. Claims shrink as the queue empties (at
  // most an (2 x translators)-th of what is left, as OpenMP's guided schedule), so the translators
  // finish close together. Each writes only the results of the sentences it claimed. Set with
  // share(&queue) before the calls, share(nullptr) after; a queue serves one call of each
  // translator.
  struct SharedSentences {
    std::mutex mutex;
    int64_t next = 0;         // the first sentence not claimed yet
    int64_t translators = 1;  // how many share the queue
  };
  void share(SharedSentences *queue) { shared_ = queue; }
  int64_t decodeSteps() const { return steps_; }  // decoder calls so far
  // Work done so far, for FLOP estimates (--profile): source positions encoded (padding
  // included) in encodeCalls blocks, decoder rows summed over calls, and decoder positions
  // computed (the cached decoder one per row; the full-prefix decoder the whole prefix of every
  // row, and it also re-projects the memory for cross-attention: memoryPositions).
  struct Work {
    int64_t encodedPositions = 0, encodeCalls = 0, rows = 0, decoderPositions = 0, memoryPositions = 0;
    // Wall time in the decoder's admissions (admitSeconds: encode, encodeSeconds, and the slot
    // copies, copySeconds), in its steps, and in the search between steps (scoring rows,
    // extending and finishing hypotheses).
    double admitSeconds = 0, encodeSeconds = 0, copySeconds = 0, stepSeconds = 0, searchSeconds = 0;
    Work &operator+=(const Work &o) {  // summed over translators (tfmc translate --workers)
      encodedPositions += o.encodedPositions, encodeCalls += o.encodeCalls, rows += o.rows;
      decoderPositions += o.decoderPositions;
      memoryPositions += o.memoryPositions;
      admitSeconds += o.admitSeconds, encodeSeconds += o.encodeSeconds, copySeconds += o.copySeconds;
      stepSeconds += o.stepSeconds, searchSeconds += o.searchSeconds;
      return *this;
    }
  };
  const Work &work() const { return work_; }

  struct Decoder;

private:
  struct Candidate {
    double logProb;
    int j;          // live hypothesis extended
    int32_t token;
    int rank = 0;   // of the token in hypothesis j's row (its best list)
  };
  Translator() = default;
  int32_t sampleToken(const float *logits, int64_t V, const std::vector<int32_t> &banned, int64_t sentence,
                      int64_t position, const std::vector<uint64_t> *sentenceIds, int32_t sample);
  SearchOptions options_;
  // Tokens given per sentence: score()'s targets (then </s>; forcedWhole_) or
  // translateWithPrefixes()'s prefixes (then the search); null otherwise.
  const std::vector<std::vector<int32_t>> *forced_ = nullptr;
  bool forcedWhole_ = false;
  // score() (whole) and translateWithPrefixes(): checks `given`, then translate() with it forced.
  tfmrt::Status translateForced(const std::vector<std::vector<int32_t>> &sources,
                                const std::vector<std::vector<int32_t>> &given, bool whole,
                                std::vector<std::vector<Hypothesis>> &out, const std::vector<uint64_t> *sentenceIds,
                                const std::function<void(size_t)> &progress);
  // translate()'s search; may throw std::bad_alloc, which translate() turns into a Status.
  tfmrt::Status search(const std::vector<std::vector<int32_t>> &sources, std::vector<std::vector<Hypothesis>> &out,
                       const std::vector<uint64_t> *sentenceIds, const std::function<void(size_t)> &progress);
  std::unique_ptr<Decoder> decoder_;
  SharedSentences *shared_ = nullptr;
  int64_t steps_ = 0;
  Work work_;
  // Scratch reused across steps.
  std::vector<Candidate> cand_;
  std::vector<Candidate> heads_;  // per live hypothesis, its next candidate (a heap)
  std::vector<int32_t> order_, candidates_;
  std::vector<std::vector<int32_t>> banned_;  // per row of the current call: tokens it may not emit
  std::vector<double> probs_, scores_;
  int threads_ = 1;  // the model's thread count, also for the search's own parallel loop
};

// One-shot convenience: the best hypothesis' tokens per source.
tfmrt::Status translateBatch(tfmrt::Model &model, const std::vector<std::vector<int32_t>> &sources,
                             const SearchOptions &options, std::vector<std::vector<int32_t>> &outputs);

}  // namespace tfmdata
