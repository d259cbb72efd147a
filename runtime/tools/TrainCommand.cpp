// `tfmc train` (compiled training steps on one batch or on a tokenised parallel corpus) and
// `tfmc tokenizer` (a joint SentencePiece vocabulary for a corpus).
#include <algorithm>
#include <chrono>
#include <climits>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <numeric>
#include <optional>
#include <tuple>
#include <atomic>
#include <csignal>
#include <pthread.h>
#include <system_error>
#include <thread>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <omp.h>

#include "Commands.h"
#include "RunSupport.h"
#include "TokenizerRecord.h"
#include "tfmdata/batcher.h"
#include "tfmdata/bleu.h"
#include "tfmdata/corpus.h"
#include "tfmdata/search.h"
#include "tfmdata/text.h"
#include "tfmdata/tokenizer.h"
#include "tfmdist/communicator.h"
#include "tfmrt/files.h"

namespace tfmc {
namespace {

// Checkpoint metadata: what the run trained on, "corpus" (--data) or "batch" (--inputs or the
// sample batch), so a resume on other data is refused.
constexpr const char *kTrainingDataKey = "training_data";
// A corpus run's batches: their fingerprint (trainingDataFingerprint) and what made them, in words.
// (Checkpoints of session 36 carry "training_data_fingerprint", which hashed the first batch only:
// like older ones without a key, they are resumed as they are.)
constexpr const char *kTrainingDataPrintKey = "training_data_digest";
constexpr const char *kTrainingDataWhatKey = "training_data_source";
// The best validation score so far (-loss, or BLEU), the validations since it and what they
// measure: a resume continues checkpoint_best and --patience from them.
constexpr const char *kValidationBestKey = "validation_best";
constexpr const char *kValidationsSinceBestKey = "validations_since_best";
constexpr const char *kValidationMeasureKey = "validation_measure";

// --data <dir> --src <lang> --tgt <lang> --tokenizer <model> (or --src-tokenizer and
// --tgt-tokenizer): the corpus as batches.
struct DataSource {
  tfmdata::Batcher train, valid;
  int64_t batchTokens = 0;  // the budget the batches were made with (--batch-tokens or the spec's)
  bool hasValid = false;
  // The vocabularies; for validation BLEU the validation sources (subword ids) and references.
  Vocabularies vocab;
  std::vector<std::vector<int32_t>> validSources;
  std::vector<std::string> validReferences;
};

// Greedy translation of the validation sources, scored as sacreBLEU does (cased BLEU).
tfmrt::Status validationBleu(tfmrt::Model &model, const tfmrt::ModelInfo &info, const DataSource &data, double &bleu) {
  tfmdata::SearchOptions options = searchOptions(info);
  options.beam = 1;
  options.maxSentences = tfmdata::defaultSentencesInFlight(1);
  std::unique_ptr<tfmdata::Translator> translator;
  TFMRT_RETURN_IF_ERROR(tfmdata::Translator::create(model, options, translator));
  // One call, longest first, as `tfmc translate` does: continuous batching refills the slots and
  // the first sentences size the session's caches for all the others.
  const size_t n = data.validSources.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return data.validSources[x].size() > data.validSources[y].size(); });
  std::vector<std::vector<int32_t>> sources;
  for (size_t k : order) sources.push_back(data.validSources[k]);
  std::vector<std::vector<tfmdata::Hypothesis>> out;
  TFMRT_RETURN_IF_ERROR(translator->translate(sources, out));
  std::vector<std::string> hypotheses(n);
  for (size_t i = 0; i < n; ++i)
    if (!out[i].empty()) hypotheses[order[i]] = data.vocab.tgt->decode(out[i][0].tokens);
  bleu = tfmdata::corpusBleu(hypotheses, data.validReferences).bleu;
  return tfmrt::Status::OK();
}

// "1:02:03" for a duration in seconds.
std::string clockTime(double seconds) {
  const long long s = (long long)(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

int loadData(const CommandLine &cl, const tfmrt::Artifact &a, DataSource &data) {
  const std::string dir = cl.get("data"), srcLang = cl.get("src", "de"), tgtLang = cl.get("tgt", "en");
  if (!namesVocabularies(cl)) {
    std::cerr << "tfmc train: error: --data needs --tokenizer <model>, or --src-tokenizer and --tgt-tokenizer (make them "
                 "with tfmc tokenizer)\n";
    return 2;
  }
  if (int code = loadVocabularies("train", cl, data.vocab)) return code;
  tfmrt::ModelInfo info;
  if (auto s = tfmrt::readModelInfo(a, info); !s.ok()) return fail("train", s);
  if (int code = checkVocabularySizes("train", data.vocab, info.srcVocabSize, info.tgtVocabSize, sharesEmbeddingTable(a)))
    return code;
  tfmdata::BatcherOptions options;
  options.batchTokens = cl.getInt("batch-tokens", info.batchTokens);
  data.batchTokens = options.batchTokens;
  options.maxLen = info.maxLen;
  options.seed = uint64_t(info.seed);
  auto build = [&](const std::string &split, tfmdata::Batcher &out) -> int {
    tfmdata::ParallelCorpus corpus;
    if (auto s = tfmdata::readParallel(dir, split, srcLang, tgtLang, corpus); !s.ok()) return fail("train", s);
    std::vector<tfmdata::Example> examples(corpus.src.size());
    // Invalid UTF-8 is replaced as translate replaces it, and said (it was taken silently).
    int64_t invalid = 0, firstInvalid = 0;
    for (size_t i = 0; i < examples.size(); ++i) {
      for (std::string *line : {&corpus.src[i], &corpus.tgt[i]})
        if (tfmdata::sanitiseUtf8(*line) && invalid++ == 0) firstInvalid = int64_t(i) + 1;
      if (auto s = data.vocab.src->encode(corpus.src[i], examples[i].src); !s.ok()) return fail("train", s);
      if (auto s = data.vocab.tgt->encode(corpus.tgt[i], examples[i].tgt); !s.ok()) return fail("train", s);
    }
    if (invalid)
      std::fprintf(stderr,
                   "tfmc train: warning: %s/%s.{%s,%s}: %lld line(s) with invalid UTF-8, its bytes replaced by U+FFFD "
                   "(first: line %lld)\n",
                   dir.c_str(), split.c_str(), srcLang.c_str(), tgtLang.c_str(), (long long)invalid, (long long)firstInvalid);
    if (&out == &data.valid) {
      data.validReferences = corpus.tgt;
      for (const tfmdata::Example &e : examples) data.validSources.push_back(e.src);
    }
    if (auto s = tfmdata::Batcher::create(std::move(examples), options, out); !s.ok()) return fail("train", s);
    std::printf("data %s/%s.{%s,%s}: %lld pairs in %lld batches of <= %lld tokens (%lld longer than max_len %lld "
                "dropped)\n",
                dir.c_str(), split.c_str(), srcLang.c_str(), tgtLang.c_str(), (long long)out.examples(),
                (long long)out.batchesPerEpoch(), (long long)options.batchTokens, (long long)out.droppedTooLong(),
                (long long)options.maxLen);
    // "batches of <= 1 tokens" was all --batch-tokens 1 said.
    if (out.overBudget())
      std::fprintf(stderr,
                   "tfmc train: warning: %s/%s: %lld pair(s) are longer than the token budget (--batch-tokens) %lld by themselves: each is "
                   "a batch of its own, over the budget\n",
                   dir.c_str(), split.c_str(), (long long)out.overBudget(), (long long)options.batchTokens);
    return 0;
  };
  if (int code = build("train", data.train)) return code;
  const std::string validSplit = cl.get("valid-split", "val");
  if (validSplit != "none") {
    if (int code = build(validSplit, data.valid)) return code;
    data.hasValid = true;
  }
  return 0;
}

// "3600", "90s", "45m", "2.5h" -> seconds; false unless positive and at most 10000 hours.
bool parseDuration(const std::string &text, double &seconds) {
  char *end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || errno == ERANGE) return false;
  const std::string unit(end);
  const double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : 0;
  seconds = value * scale;
  return scale > 0 && std::isfinite(seconds) && seconds > 0 && seconds <= 10000.0 * 3600;
}

// Token-weighted mean loss of the forward entry over every validation batch.
double validationLoss(tfmrt::Model &model, const tfmdata::Batcher &valid, tfmrt::Status &status) {
  double total = 0, tokens = 0;
  std::vector<tfmrt::Tensor> out;
  for (int64_t i = 0; i < valid.batchesPerEpoch(); ++i) {
    tfmdata::Batch b = valid.orderedBatch(i);
    status = model.run("forward", {b.src, b.tgtIn, b.tgtOut}, out);
    if (!status.ok()) return NAN;
    total += double(out[1].data<float>()[0]) * double(b.tgtTokens);
    tokens += double(b.tgtTokens);
  }
  return tokens > 0 ? total / tokens : NAN;
}

// SIGINT / SIGTERM end training after the current step, with a checkpoint (exit 128 + signal,
// as shells report it). A second signal while that checkpoint is written kills at once: writes
// are atomic, so the previous checkpoint is still intact. A repeat within a second is the same
// request delivered twice, not a second one: `timeout` signals its child, then its whole process
// group (that killed the run before it saved). Before the steps start (loading, reading the
// corpus) a signal kills at once too.
//
// The handler runs on a thread of its own that does nothing else: every other thread blocks the
// two signals. oneDNN 2.6's generated f32 GEMM kernels point rsp into the heap while they run
// (oneDNN issue #4845, fixed in 3.x), so a handler run on a compute thread wrote its signal frame
// into the heap: SIGINT during training aborted with "corrupted size vs. prev_size" (2-5 runs in 16).
std::atomic<int> gStopSignal{0};  // lock-free: set by the handler on one thread, read on another
std::atomic<int64_t> gStopSignalMillis{0};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free,
              "the stop flag is written in a signal handler");

int64_t monotonicMillis() {  // async-signal-safe (clock_gettime)
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void writeToStderr(const char *text) {  // async-signal-safe
  if (::write(2, text, std::strlen(text)) < 0) return;
}

extern "C" void onStopSignal(int sig) {
  const int saved = errno;
  if (gStopSignal.load() != 0) {
    if (monotonicMillis() - gStopSignalMillis.load() < 1000) {  // the same request, delivered twice
      errno = saved;
      return;
    }
    writeToStderr("tfmc train: second signal: quitting without a checkpoint (the last one written is intact)\n");
    std::signal(sig, SIG_DFL);
    std::raise(sig);  // this thread does not block it: the default action, ending the process
    return;
  }
  gStopSignalMillis.store(monotonicMillis());
  gStopSignal.store(sig);
  writeToStderr(sig == SIGINT ? "tfmc train: SIGINT: stopping after this step (again, a second later, to quit at once)\n"
                              : "tfmc train: SIGTERM: stopping after this step (again, a second later, to quit at once)\n");
  errno = saved;
}

class StopSignals {
public:
  // Before any other thread starts (OpenMP's, MPI's): they inherit the blocked mask. Until arm()
  // the receiving thread meets the signals with their inherited disposition (the default ends the
  // process; an ignored one stays ignored).
  StopSignals() {
    gStopSignal = 0;
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, &oldMask_);
    try {
      receiver_ = std::thread([this, stop] {
        pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
        while (!done_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      });
    } catch (const std::system_error &) {  // no thread: the signals reach this one, as before
      pthread_sigmask(SIG_SETMASK, &oldMask_, nullptr);
    }
  }
  // From here a signal ends training after the current step (installed now, after MPI's start-up,
  // so a handler it might install does not replace this one).
  void arm() {
    gStopSignal = 0;
    struct sigaction sa {};
    sa.sa_handler = onStopSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &oldInt_);
    sigaction(SIGTERM, &sa, &oldTerm_);
    // A closed standard output (`| head`, a log reader that died) fails the write instead of
    // killing the run: training stops after the step with a checkpoint (see outputClosed).
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, nullptr);
    armed_ = true;
  }
  ~StopSignals() {
    done_ = true;
    if (receiver_.joinable()) receiver_.join();
    // After a stop signal the handler stays: a repeat within its second (timeout's second
    // delivery) would otherwise end the process by the default action while it exits.
    if (armed_ && gStopSignal.load() == 0) {
      sigaction(SIGINT, &oldInt_, nullptr);
      sigaction(SIGTERM, &oldTerm_, nullptr);
      // SIGPIPE stays ignored: stdio flushes what is left for a closed stdout at exit.
    }
    pthread_sigmask(SIG_SETMASK, &oldMask_, nullptr);
  }
  StopSignals(const StopSignals &) = delete;
  StopSignals &operator=(const StopSignals &) = delete;

private:
  struct sigaction oldInt_ {}, oldTerm_ {};
  sigset_t oldMask_{};
  bool armed_ = false;
  std::atomic<bool> done_{false};
  std::thread receiver_;
};

// The first parameter holding a NaN or an infinity, or "" (after a step whose loss or gradient
// was not finite, this names where the damage reached the weights).
std::string firstNonFiniteParameter(const tfmrt::Model &model) {
  for (const auto &p : model.artifact().params) {
    const tfmrt::Tensor *w = model.weight(p.name);
    if (!w) continue;
    const float *v = w->data<float>();
    for (int64_t i = 0; i < w->numel(); ++i)
      if (!std::isfinite(v[i])) return p.name;
  }
  return "";
}

uint64_t fileFingerprint(const std::string &path) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) return 0;
  uint64_t h = tfmdist::fingerprint(nullptr, 0);
  std::vector<char> buf(1 << 20);
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), f)) > 0;) h = tfmdist::fingerprint(buf.data(), n, h);
  std::fclose(f);
  return h;
}

// What a corpus run's batches are made of: every batch's token ids (in length order, so before
// any shuffle) and the pair and batch counts, so another corpus, an edited line, another language
// direction, tokenizer or --batch-tokens changes it. Ranks compare it; a resume compares it with
// the checkpoint's. Hashing Multi30k's 29k pairs takes a few milliseconds.
uint64_t trainingDataFingerprint(const tfmdata::Batcher &train) {
  uint64_t h = tfmdist::fingerprint(nullptr, 0);
  for (int64_t i = 0; i < train.batchesPerEpoch(); ++i) {
    const tfmdata::Batch b = train.orderedBatch(i);
    h = tfmdist::fingerprint(b.src.rawData(), b.src.nbytes(), h);
    h = tfmdist::fingerprint(b.tgtOut.rawData(), b.tgtOut.nbytes(), h);
  }
  const int64_t sizes[2] = {train.examples(), train.batchesPerEpoch()};
  return tfmdist::fingerprint(sizes, sizeof sizes, h);
}

// "multi30k/train.{de,en}, 29000 pairs in 214 batches of <= 2048 tokens" (the directory's last
// component: the same corpus elsewhere is the same corpus).
std::string trainingDataWhat(const CommandLine &cl, const DataSource &data) {
  const tfmdata::Batcher &train = data.train;
  std::string dir = cl.get("data");
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash + 1 < dir.size()) dir = dir.substr(slash + 1);
  return dir + "/train.{" + cl.get("src", "de") + "," + cl.get("tgt", "en") + "}, " + std::to_string(train.examples()) +
         " pairs in " + std::to_string(train.batchesPerEpoch()) + " batches of <= " +
         std::to_string(data.batchTokens) + " tokens";
}

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

// Under mpirun: every rank must hold the same `what` (artifact, weights, data, options). Returns
// 0 when they agree; otherwise every rank prints which ranks differ and returns 1 (all ranks take
// the same branch, so none is left waiting in a collective).
int ranksAgree(tfmdist::Communicator &comm, const char *what, uint64_t value, const char *advice) {
  std::vector<uint64_t> all;
  if (auto s = comm.allgather(value, all); !s.ok()) return fail("train", s);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) {
      // One write: the launcher forwards it as one piece, not interleaved with other ranks' lines.
      const std::string message = "tfmc train: error: rank " + std::to_string(comm.rank()) + " of " +
                                  std::to_string(comm.size()) + ": the ranks do not hold the same " + what +
                                  " (rank 0 and rank " + std::to_string(r) + " differ; this rank's fingerprint " + hex64(value) +
                                  "): " + advice + "\n";
      std::fputs(message.c_str(), stderr);
      return 1;
    }
  return 0;
}

}  // namespace

// The command line's training settings, exactly (ranks compare them).
std::string overridesText(const tfmrt::TrainingOverrides &o) {
  std::string text;
  char buf[40];
  for (const std::optional<double> &v :
       {o.lrScale, o.peakLr, o.clipNorm, o.weightDecay, o.adamBeta1, o.adamBeta2, o.adamEps, o.labelSmoothing, o.dropout,
        o.attentionDropout, o.activationDropout})
    text += v ? (std::snprintf(buf, sizeof buf, "%.17g;", *v), buf) : "-;";
  return text + (o.warmupSteps ? std::to_string(*o.warmupSteps) : "-");
}

// How to resume a checkpoint whose training settings differ from `artifact`'s: by the command
// line when it can set every changed key to the checkpoint's value (not clipping on or off, nor a
// dropout rate > 0 the artifact has no sites for).
std::string resumeSettingsHint(const std::vector<tfmrt::TrainingSettingChange> &changes, const tfmrt::Artifact &artifact) {
  bool allSettable = true;
  for (const tfmrt::TrainingSettingChange &c : changes)
    allSettable &= tfmrt::trainingOptionsCanSet(artifact, c.key, std::strtod(c.checkpointValue.c_str(), nullptr));
  if (!allSettable) return "recompile the spec with the checkpoint's values, ";
  std::string options;
  const char *last = "";
  for (const tfmrt::SettableTrainingKey &s : tfmrt::settableTrainingKeys())  // beta1, beta2: one option
    if (std::strcmp(s.option, last) != 0) options += (options.empty() ? "" : ", ") + std::string(last = s.option);
  return "pass the options that give the checkpoint's values (" + options + "), recompile the spec with them, ";
}

int trainOnRanks(const CommandLine &cl, tfmdist::Communicator &comm, StopSignals &stopSignals);

// `tfmc train` under an MPI launcher or alone. A rank that fails on its own ends the whole job:
// the others would otherwise wait for it in the next collective forever.
int trainCommand(const CommandLine &cl) {
  StopSignals stopSignals;  // first: every thread started from here on blocks SIGINT and SIGTERM
  std::unique_ptr<tfmdist::Communicator> comm;
  if (auto s = tfmdist::Communicator::create(comm); !s.ok()) return fail("train", s);
  if (cl.has("quiet") || (comm->distributed() && comm->rank() != 0)) {
    // --quiet, or one log: rank 0 prints progress; the others print only their errors (stderr).
    if (!std::freopen("/dev/null", "w", stdout))
      std::cerr << "tfmc train: warning: cannot silence standard output" << (cl.has("quiet") ? "" : " of rank ")
                << (cl.has("quiet") ? std::string() : std::to_string(comm->rank())) << "\n";
  }
  const int code = trainOnRanks(cl, *comm, stopSignals);
  // Stopping by a signal is collective (every rank leaves the same step, after rank 0's
  // checkpoint): each rank exits 130 / 143 on its own, as one process does. Aborting the job
  // for it printed MPI_ABORT's banner, exited 1, and could cut rank 0's checkpoint write short.
  const bool interrupted = code == 128 + SIGINT || code == 128 + SIGTERM;
  if (code != 0 && !interrupted && comm->distributed()) comm->abortJob(code);
  return code;
}

// `tfmc train`: compiled training steps (the train_step entry) on one batch (--inputs or the
// built-in sample) or on a corpus (--data), with checkpoints and exact resume.
int trainOnRanks(const CommandLine &cl, tfmdist::Communicator &comm, StopSignals &stopSignals) {
  const bool distributed = comm.distributed();
  const bool leader = comm.rank() == 0;  // the rank that writes checkpoints, metrics and validation
  const int64_t ranks = comm.size();
  // Before readRunSettings, which would check their values (--iters 0, --entry foo) first.
  if (cl.has("iters")) {
    std::cerr << "tfmc train: error: --iters is run's; train counts --steps\n";
    return 2;
  }
  if (cl.has("entry")) {
    std::cerr << "tfmc train: error: --entry is run's; train always runs the train_step entry\n";
    return 2;
  }
  RunSettings rs;
  if (!readRunSettings("train", cl, rs,
                       {"steps", "first-step", "log-every", "checkpoint", "checkpoint-every", "resume", "data", "src",
                        "tgt", "tokenizer", "src-tokenizer", "tgt-tokenizer", "batch-tokens", "valid-split", "eval-every", "metrics", "save-dir", "keep-last", "patience", "valid-bleu", "update-freq", "check-weights-every", "skip-nonfinite", "max-epochs",
                        "time-limit", "quiet", "lr", "lr-scale", "warmup-steps", "clip-norm", "weight-decay", "adam-betas", "adam-eps",
                        "label-smoothing", "dropout", "attention-dropout", "activation-dropout"}))
    return 2;
  // Training settings without recompiling (--lr, ...; checked when applied). + 0.0: -0 is 0, as
  // checkpoints record it.
  tfmrt::TrainingOverrides &overrides = rs.trainingOverrides;
  if (cl.has("lr")) overrides.peakLr = cl.getDouble("lr", 0) + 0.0;
  if (cl.has("lr-scale")) overrides.lrScale = cl.getDouble("lr-scale", 0) + 0.0;
  if (cl.has("warmup-steps")) overrides.warmupSteps = cl.getInt("warmup-steps", 0);
  if (cl.has("clip-norm")) overrides.clipNorm = cl.getDouble("clip-norm", 0) + 0.0;
  if (cl.has("weight-decay")) overrides.weightDecay = cl.getDouble("weight-decay", 0) + 0.0;
  if (cl.has("adam-eps")) overrides.adamEps = cl.getDouble("adam-eps", 0) + 0.0;
  if (cl.has("label-smoothing")) overrides.labelSmoothing = cl.getDouble("label-smoothing", 0) + 0.0;
  if (cl.has("dropout")) overrides.dropout = cl.getDouble("dropout", 0) + 0.0;
  if (cl.has("attention-dropout")) overrides.attentionDropout = cl.getDouble("attention-dropout", 0) + 0.0;
  if (cl.has("activation-dropout")) overrides.activationDropout = cl.getDouble("activation-dropout", 0) + 0.0;
  if (cl.has("adam-betas")) {
    // "0.9,0.98", or fairseq's spelling "(0.9, 0.98)".
    std::string text = cl.get("adam-betas");
    text.erase(std::remove_if(text.begin(), text.end(), [](char c) { return c == '(' || c == ')' || c == ' '; }), text.end());
    const size_t comma = text.find(',');
    char *end1 = nullptr, *end2 = nullptr;
    const std::string first = text.substr(0, comma), second = comma == std::string::npos ? "" : text.substr(comma + 1);
    const double b1 = std::strtod(first.c_str(), &end1), b2 = std::strtod(second.c_str(), &end2);
    if (comma == std::string::npos || first.empty() || second.empty() || *end1 || *end2) {
      std::cerr << "tfmc train: error: --adam-betas takes two numbers, beta1,beta2 (e.g. 0.9,0.98), got '"
                << cl.get("adam-betas") << "'\n";
      return 2;
    }
    overrides.adamBeta1 = b1 + 0.0;
    overrides.adamBeta2 = b2 + 0.0;
  }
  if (cl.positionals.size() != 1) {
    std::cerr << "tfmc train: error: expected exactly one artifact (tfmc train <model.tfmx>, compiled with "
                 "--entries=forward,train_step)"
              << positionalsGiven(cl) << "\n";
    return 2;
  }
  const bool corpus = cl.has("data");
  if (const std::string why = vocabularyOptionsError(cl); !why.empty()) {
    std::cerr << "tfmc train: error: " << why << "\n";
    return 2;
  }
  if (distributed && !corpus) {
    std::cerr << "tfmc train: error: under mpirun every rank trains on its own share of a corpus: pass --data\n";
    return 2;
  }
  const int64_t checkWeightsEvery = cl.getInt("check-weights-every", 100);
  if (checkWeightsEvery < 0) {
    std::cerr << "tfmc train: error: --check-weights-every must be >= 0\n";
    return 2;
  }
  if (cl.has("check-weights-every") && !distributed) {  // it was taken and did nothing
    std::cerr << "tfmc train: error: --check-weights-every compares the ranks of a data-parallel run (under mpirun); "
                 "this run has one process: drop it\n";
    return 2;
  }
  if (corpus && (cl.has("inputs") || cl.has("batch") || cl.has("src-len") || cl.has("tgt-len"))) {
    std::cerr << "tfmc train: error: --data batches the corpus itself; drop --inputs/--batch/--src-len/--tgt-len\n";
    return 2;
  }
  rs.artifactPath = cl.positionals[0];
  // --save-dir: checkpoint_last (what --checkpoint names otherwise), checkpoint_best (best
  // validation so far), and with --keep-last N the last N checkpoint_<step>.
  const std::string saveDir = cl.get("save-dir");
  if (!saveDir.empty() && cl.has("checkpoint")) {
    std::cerr << "tfmc train: error: --save-dir writes <dir>/checkpoint_last itself; drop --checkpoint\n";
    return 2;
  }
  const std::string resume = cl.get("resume");
  // A resumed run saves where it resumed from unless told otherwise (as Marian and fairseq do):
  // without --checkpoint, the steps after a resume were trained and then thrown away.
  // Not a device or /proc path (--resume /dev/stdin < ck would append to ck), and a --save-dir's
  // checkpoint_best or checkpoint_<step> continues into its checkpoint_last, not under that name.
  const bool checkpointIsResume = saveDir.empty() && !cl.has("checkpoint") && !resume.empty() &&
                                  resume.rfind("/dev/", 0) != 0 && resume.rfind("/proc/", 0) != 0;
  std::string resumeTarget = resume;
  if (checkpointIsResume) {
    const size_t slash = resume.find_last_of('/');
    const std::string base = resume.substr(slash + 1);  // npos + 1 == 0
    const bool numbered = base.size() > 11 && base.compare(0, 11, "checkpoint_") == 0 &&
                          base.find_first_not_of("0123456789", 11) == std::string::npos;
    if (base == "checkpoint_best" || numbered)
      resumeTarget = (slash == std::string::npos ? std::string() : resume.substr(0, slash + 1)) + "checkpoint_last";
  }
  const std::string checkpoint = !saveDir.empty()    ? saveDir + "/checkpoint_last"
                                 : checkpointIsResume ? resumeTarget
                                                      : cl.get("checkpoint");
  const int64_t checkpointEvery = cl.getInt("checkpoint-every", 0);
  const int64_t keepLast = cl.getInt("keep-last", 0), patience = cl.getInt("patience", 0);
  // --max-epochs N: stop at the step that completes epoch N; --time-limit: after the first step
  // that ends past it (each with a checkpoint), as fairseq's --max-epoch / --stop-time-hours.
  const int64_t maxEpochs = cl.getInt("max-epochs", 0);
  if (cl.has("max-epochs") && (!corpus || maxEpochs < 1 || maxEpochs > 1000000)) {
    std::cerr << "tfmc train: error: --max-epochs counts epochs of a corpus (--data), from 1 to 1000000; got "
              << cl.get("max-epochs") << (corpus ? "" : " without --data") << "\n";
    return 2;
  }
  double timeLimitSeconds = 0;
  if (cl.has("time-limit") && !parseDuration(cl.get("time-limit"), timeLimitSeconds)) {
    std::cerr << "tfmc train: error: --time-limit takes a duration such as 3600, 90s, 45m or 2.5h (at most 10000h); got '"
              << cl.get("time-limit") << "'\n";
    return 2;
  }
  const bool validBleu = cl.has("valid-bleu");
  if (keepLast < 0 || patience < 0) {
    std::cerr << "tfmc train: error: " << (keepLast < 0 ? "--keep-last" : "--patience") << " must be >= 0, got "
              << (keepLast < 0 ? keepLast : patience) << "\n";
    return 2;
  }
  if (keepLast > 0 && saveDir.empty()) {
    std::cerr << "tfmc train: error: --keep-last N needs --save-dir\n";
    return 2;
  }
  if ((validBleu || patience > 0) && (!cl.has("data") || cl.get("valid-split", "val") == "none")) {
    std::cerr << "tfmc train: error: " << (validBleu && patience > 0 ? "--valid-bleu and --patience need" : validBleu ? "--valid-bleu needs" : "--patience needs")
              << " a validation split (--data, not --valid-split none)\n";
    return 2;
  }
  if (!resume.empty() && (cl.has("first-step") || cl.has("weights") || cl.has("seed"))) {
    std::cerr << "tfmc train: error: --resume takes weights, optimizer state and the step from the checkpoint; "
                 "drop --first-step / --weights / --seed\n";
    return 2;
  }
  if (checkpointEvery < 0) {
    std::cerr << "tfmc train: error: --checkpoint-every must be >= 0 (0: only at the end), got " << checkpointEvery << "\n";
    return 2;
  }
  if (checkpointEvery > 0 && checkpoint.empty()) {
    std::cerr << "tfmc train: error: --checkpoint-every N needs --checkpoint <file> or --save-dir <dir>\n";
    return 2;
  }
  int64_t firstStep = cl.getInt("first-step", 1);
  if (cl.has("steps") && cl.getInt("steps", 1) < 1) {
    std::cerr << "tfmc train: error: --steps must be >= 1\n";
    return 2;
  }
  // (Compared without forming firstStep + steps, which overflowed for --first-step 2^63 - 1.)
  if (firstStep >= 1 && firstStep <= INT32_MAX && cl.has("steps") && cl.getInt("steps", 1) > INT32_MAX - firstStep + 1) {
    std::cerr << "tfmc train: error: --steps " << cl.getInt("steps", 1) << " from step " << firstStep
              << " runs past step " << INT32_MAX << ", the last one supported\n";
    return 2;
  }
  if (firstStep < 1 || firstStep > INT32_MAX) {
    std::cerr << "tfmc train: error: --first-step must be >= 1 (and the last step at most " << INT32_MAX << ")\n";
    return 2;
  }
  const int64_t evalEvery = cl.getInt("eval-every", 0);
  // Such values were taken: --batch-tokens 0 or -5 made one-sentence batches ("<= -5 tokens"),
  // --eval-every below 0 meant "at the end", --log-every below 1 "every step".
  for (const char *flag : {"log-every", "batch-tokens"})
    if (cl.getInt(flag, 1) < 1) {
      std::cerr << "tfmc train: error: --" << flag << " must be >= 1, got " << cl.getInt(flag, 1) << "\n";
      return 2;
    }
  if (evalEvery < 0) {
    std::cerr << "tfmc train: error: --eval-every must be >= 0 (0: at the end), got " << evalEvery << "\n";
    return 2;
  }
  if (cl.has("eval-every") && cl.has("data") && cl.get("valid-split", "val") == "none") {  // it was taken and ignored
    std::cerr << "tfmc train: error: --eval-every evaluates on the validation split: drop it or --valid-split none\n";
    return 2;
  }
  // Options of corpus training (after their range checks) were taken and ignored without a corpus.
  if (!corpus)
    for (const char *flag : {"tokenizer", "src-tokenizer", "tgt-tokenizer", "batch-tokens", "eval-every", "valid-split", "src", "tgt"})
      if (cl.has(flag)) {
        std::cerr << "tfmc train: error: --" << flag << " applies to training on a corpus (--data); drop it or add --data\n";
        return 2;
      }
  // Outputs that are inputs (train model.tfmx --checkpoint model.tfmx) would destroy them. Allowed:
  // --resume and --checkpoint naming one file (the usual way to continue a run), and --save-weights
  // replacing the --weights it started from (read first; run allows it too). Checked before the
  // metrics file is opened, which creates it.
  // The corpus too: every file of --data (--checkpoint data/val.en.gz replaced the references).
  const std::string artifact = rs.artifactPath, tokenizer = cl.get("tokenizer"), srcTokenizer = cl.get("src-tokenizer"),
                    tgtTokenizer = cl.get("tgt-tokenizer"), metricsPath = cl.get("metrics");
  const std::vector<std::string> corpusFiles = tfmdata::corpusDirectoryFiles(cl.get("data"));
  for (auto [path, what, inputs] :
       {std::tuple<std::string, const char *, std::vector<std::string>>{checkpoint, "--checkpoint file", {artifact, tokenizer, srcTokenizer, tgtTokenizer, rs.weights, rs.inputs}},
        {rs.saveWeights, "--save-weights file", {artifact, tokenizer, srcTokenizer, tgtTokenizer, resume, checkpoint, rs.inputs}},
        {metricsPath, "--metrics file", {artifact, tokenizer, srcTokenizer, tgtTokenizer, rs.weights, resume, rs.inputs}}})
    if (!path.empty()) {
      inputs.insert(inputs.end(), corpusFiles.begin(), corpusFiles.end());
      if (tfmrt::Status s = tfmrt::refuseOverwriting(path, what, inputs); !s.ok()) {
        std::cerr << "tfmc train: error: " << s.message() << "\n";
        return 2;
      }
    }
  // Two outputs naming one file: the later write replaced the earlier (--save-weights
  // <dir>/checkpoint_best left no best checkpoint). With --save-dir, every checkpoint_* in it is
  // its own.
  const std::string saveDirResolved = tfmrt::resolvedOutputPath(saveDir);
  for (auto [path, what] : {std::pair<std::string, const char *>{rs.saveWeights, "--save-weights file"},
                            {metricsPath, "--metrics file"}}) {
    const std::string resolved = tfmrt::resolvedOutputPath(path);
    const size_t slash = resolved.find_last_of('/');
    if (!saveDir.empty() && slash != std::string::npos && resolved.compare(slash + 1, 11, "checkpoint_") == 0 &&
        resolved.substr(0, std::max<size_t>(slash, 1)) == saveDirResolved) {
      std::cerr << "tfmc train: error: the " << what << " '" << path << "' is in --save-dir '" << saveDir
                << "' under a name of its checkpoints (checkpoint_*); choose another path\n";
      return 2;
    }
  }
  if (tfmrt::Status s = tfmrt::refuseSharedOutputs({{checkpoint, saveDir.empty() ? "--checkpoint file" : "--save-dir checkpoint"},
                                                    {rs.saveWeights, "--save-weights file"},
                                                    {metricsPath, "--metrics file"}});
      !s.ok()) {
    std::cerr << "tfmc train: error: " << s.message() << "\n";
    return 2;
  }
  // Created once every option has been checked (a refused --keep-last left an empty directory).
  if (leader && !saveDir.empty() && mkdir(saveDir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::cerr << "tfmc train: error: cannot create --save-dir '" << saveDir << "': " << std::strerror(errno) << "\n";
    return 1;
  }
  // The metrics file is opened before any work, so a bad path costs nothing.
  std::FILE *metrics = nullptr;
  if (cl.has("metrics") && leader) {
    metrics = std::fopen(cl.get("metrics").c_str(), "a");
    if (!metrics) {
      std::cerr << "tfmc train: error: cannot write the metrics file '" << cl.get("metrics") << "': " << std::strerror(errno)
                << "\n";
      return 1;
    }
  }
  struct CloseFile {
    std::FILE *f;
    ~CloseFile() {
      if (f) std::fclose(f);
    }
  } closeMetrics{metrics};
  // A metrics line that cannot be written (a full disk) is reported once, training goes on (its
  // checkpoints matter more), and the command then ends with status 1: `--metrics /dev/full`
  // had exited 0 with nothing said.
  bool metricsLost = false;
  auto writeMetrics = [&](const std::string &line, int64_t step) {
    if (!metrics || metricsLost) return;
    errno = 0;
    if (std::fputs(line.c_str(), metrics) < 0 || std::fflush(metrics) != 0 || std::ferror(metrics)) {
      metricsLost = true;
      std::cerr << "tfmc train: warning: cannot write the metrics file '" << cl.get("metrics") << "' at step " << step
                << (errno ? std::string(": ") + std::strerror(errno) : std::string()) << "; training goes on without it\n";
    }
  };
  // The checkpoint defaults to the --resume file: a directory there is an input error first.
  if (struct stat st; !resume.empty() && ::stat(resume.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::cerr << "tfmc train: error: --resume takes a checkpoint file; '" << resume << "' is a directory\n";
    return 2;
  }
  for (const auto &[path, what] : {std::pair<std::string, const char *>{checkpoint, "the checkpoint"},
                                   {rs.saveWeights, "the --save-weights file"}})
    if (leader && !path.empty())
      if (tfmrt::Status s = tfmrt::checkWritable(path, what); !s.ok()) {
        std::cerr << "tfmc train: error: " << s.message() << "\n";
        return 1;
      }
  std::unique_ptr<tfmrt::Model> model;
  std::vector<tfmrt::Tensor> inputs;
  if (int code = prepareRun("train", rs, /*saveLater=*/true, model, inputs)) return code;
  if (!distributed) noticeBusyCores("train", rs.threads > 0 ? int(rs.threads) : omp_get_max_threads());
  const tfmrt::Artifact &a = model->artifact();
  tfmrt::ModelInfo info;
  if (auto s = tfmrt::readModelInfo(a, info); !s.ok()) return fail("train", s);
  auto hasEntry = [&](const char *name) {
    for (const auto &fn : a.functions)
      if (fn.name == name) return true;
    return false;
  };
  // --update-freq N: one step = the token-weighted sum of N batches' gradients (the
  // accumulate_gradients and apply_update entries); 1 runs train_step.
  const int64_t updateFreq = cl.getInt("update-freq", 1);
  if (updateFreq < 1 || updateFreq > 1024) {
    std::cerr << "tfmc train: error: --update-freq must be in [1, 1024], got " << updateFreq << "\n";
    return 2;
  }
  // Under mpirun every step sums gradients across ranks between the two accumulate entries.
  // --skip-nonfinite inspects the summed gradients before the update, which needs the update apart.
  const bool skipNonFinite = cl.has("skip-nonfinite");
  const bool accumulate = updateFreq > 1 || distributed || skipNonFinite;
  const int64_t batchesPerStep = updateFreq * ranks;  // the global batch of one step
  if (!accumulate && !hasEntry("train_step")) {
    std::cerr << "tfmc train: error: " << rs.artifactPath
              << " has no train_step entry (compile it with --entries=forward,train_step)\n";
    return 1;
  }
  if (accumulate && !(hasEntry("accumulate_gradients") && hasEntry("apply_update"))) {
    std::cerr << "tfmc train: error: "
              << (distributed ? "data-parallel training (mpirun)" : updateFreq > 1 ? "--update-freq" : "--skip-nonfinite")
              << " needs the accumulate entries: compile " << rs.artifactPath
              << " with --entries=forward,train_step,accumulate\n";
    return 1;
  }
  DataSource data;
  if (corpus)
    if (int code = loadData(cl, a, data)) return code;
  if (data.hasValid) {
    if (!hasEntry("forward")) {
      std::cerr << "tfmc train: error: validation needs the forward entry (compile with --entries=forward,train_step) "
                   "or pass --valid-split none\n";
      return 1;
    }
  }
  // How validations are scored ("<split> loss" or "<split> BLEU"): a record kept across a resume
  // only compares like with like.
  const std::string validationMeasure = cl.get("valid-split", "val") + (validBleu ? " BLEU" : " loss");
  // The batches' digest: compared with a resumed checkpoint's, between ranks, and recorded.
  const uint64_t dataDigest = corpus ? trainingDataFingerprint(data.train) : 0;
  double resumedBest = NAN;
  int64_t resumedSinceBest = 0;
  if (!resume.empty()) {
    int64_t last = 0;
    CheckpointMeta resumed;
    if (auto s = model->loadCheckpoint(resume, last, &resumed); !s.ok()) return fail("train", s);
    if (const auto changes = tfmrt::trainingSettingChanges(resumed, model->artifact()); !changes.empty()) {
      std::cerr << "tfmc train: error: checkpoint '" << resume << "' was trained with other training settings than "
                << rs.artifactPath << " has (" << tfmrt::describeTrainingSettingChanges(changes)
                << "); resuming continues the same run, so they must match: " << resumeSettingsHint(changes, model->artifact())
                << "or start a new run from its weights (--weights instead of --resume)\n";
      return 1;  // as every other refused resume (2 is for a command line that does not parse)
    }
    // A run continues on the data it started on: a corpus checkpoint resumed on the sample batch
    // (or the reverse) was taken silently. Checkpoints before "training_data" was recorded tell
    // corpus runs by their tokenizer.
    const auto wasData = resumed.find(kTrainingDataKey);
    const std::string previousData = wasData != resumed.end()                  ? wasData->second
                                     : resumed.count("tokenizer.fingerprint") ? std::string("corpus")
                                                                              : std::string();
    if (!previousData.empty() && (previousData == "corpus") != corpus) {
      std::cerr << "tfmc train: error: " << resume << " was trained "
                << (previousData == "corpus" ? "on a corpus (--data)" : "without a corpus (--inputs or the sample batch)")
                << "; this run trains " << (corpus ? "on a corpus" : "without one")
                << ": resume it on the same kind of data\n";
      return 2;
    }
    if (corpus)
      if (int code = checkVocabularies("train", resumed, resume, data.vocab)) return code;
    // The batch order is a function of the global batch (ranks x --update-freq): a resume
    // continues exactly when that is unchanged, however it is split over ranks (re-sharding
    // 2 ranks x 1 into 1 x 2 is deliberate and exact); another global batch is refused.
    const auto wasRanks = resumed.find("data_parallel_ranks"), wasBatches = resumed.find("batches_per_step");
    const int64_t previousRanks = wasRanks == resumed.end() ? 1 : std::atoll(wasRanks->second.c_str());
    if (wasBatches != resumed.end()) {
      const int64_t previous = std::atoll(wasBatches->second.c_str());
      if (previous != batchesPerStep) {
        std::cerr << "tfmc train: error: " << resume << " was written by a run of " << previousRanks << " rank(s) with "
                  << previous << " batches per step; this run has " << ranks << " rank(s) x --update-freq " << updateFreq
                  << " = " << batchesPerStep
                  << ": resume with the same global batch (ranks x --update-freq), so the batch order continues exactly\n";
        return 1;
      }
      if (previousRanks != ranks)
        std::printf("re-sharded: %s was written by %lld rank(s); %lld rank(s) x --update-freq %lld continue the same %lld "
                    "batches per step\n",
                    resume.c_str(), (long long)previousRanks, (long long)ranks, (long long)updateFreq,
                    (long long)batchesPerStep);
    }
    // The same corpus, direction, tokenizer and --batch-tokens (checkpoints from before this check
    // carry no fingerprint and are taken as they are).
    const auto wasPrint = resumed.find(kTrainingDataPrintKey);
    if (corpus && wasPrint != resumed.end() && wasPrint->second != hex64(dataDigest)) {
      const auto wasWhat = resumed.find(kTrainingDataWhatKey);
      const std::string was = wasWhat != resumed.end() ? wasWhat->second : std::string("unrecorded"),
                        now = trainingDataWhat(cl, data);
      std::cerr << "tfmc train: error: " << resume << " was trained on other batches ("
                << (was == now ? now + "; the same counts, so the corpus's text changed" : was + ") than this run's (" + now)
                << "): resume it with the same --data, --src, --tgt and --batch-tokens, or start a new run from its "
                   "weights (--weights instead of --resume)\n";
      return 1;
    }
    // The best validation so far and the validations since it, if measured the same way (the
    // same split, loss or BLEU): checkpoint_best and --patience go on from there (both restarted,
    // so a worse model replaced checkpoint_best after every resume).
    const auto wasBest = resumed.find(kValidationBestKey), wasSince = resumed.find(kValidationsSinceBestKey),
               wasMeasure = resumed.find(kValidationMeasureKey);
    if (wasBest != resumed.end() && wasSince != resumed.end() && wasMeasure != resumed.end() &&
        wasMeasure->second == validationMeasure) {
      resumedBest = std::strtod(wasBest->second.c_str(), nullptr);
      resumedSinceBest = std::strtoll(wasSince->second.c_str(), nullptr, 10);
    }
    firstStep = last + 1;
    std::printf("resumed from %s after step %lld\n", resume.c_str(), (long long)last);
    if (checkpointIsResume && leader)
      std::printf("checkpoints go to %s, %s (--checkpoint <file> writes them elsewhere)\n", checkpoint.c_str(),
                  checkpoint == resume ? "the file resumed from" : "beside the file resumed from");
  }
  // On a corpus, training runs to the spec's training.max_steps unless --steps says how many
  // more; one batch (a demonstration or a test) runs 20 steps.
  int64_t steps = cl.has("steps") ? cl.getInt("steps", 1) : corpus ? info.maxSteps - firstStep + 1 : 20;
  if (maxEpochs > 0) {
    // Step s trains batches (s - 1) x B .. s x B - 1 (B batches per step): epoch N ends in step
    // ceil(N x batches per epoch / B).
    const int64_t perEpoch = data.train.batchesPerEpoch();
    const int64_t lastStep = (maxEpochs * perEpoch + batchesPerStep - 1) / batchesPerStep;
    if (lastStep < firstStep) {
      std::printf("nothing to do: step %lld is past the end of epoch %lld (--max-epochs)\n", (long long)(firstStep - 1),
                  (long long)maxEpochs);
      return 0;
    }
    steps = std::min(steps, lastStep - firstStep + 1);
  }
  if (steps < 1) {
    std::printf("nothing to do: step %lld reached training.max_steps %lld (pass --steps N to train further)\n",
                (long long)(firstStep - 1), (long long)info.maxSteps);
    return 0;
  }
  if (steps > INT32_MAX - firstStep + 1) {
    std::cerr << "tfmc train: error: steps past " << INT32_MAX << " are not supported\n";
    return 2;
  }
  const int64_t logEvery = std::max<int64_t>(1, cl.getInt("log-every", std::max<int64_t>(1, steps / 10)));
  if (validBleu) {
    if (!hasEntry("decode_step")) {
      std::cerr << "tfmc train: error: --valid-bleu translates the validation set: compile with "
                   "--entries=forward,train_step,translate\n";
      return 1;
    }
  }
  CheckpointMeta checkpointMeta{{"artifact", rs.artifactPath}, {kTrainingDataKey, corpus ? "corpus" : "batch"}};
  // Weights from a checkpoint (--weights ck) of a corpus run: the same tokenizer, as for --resume.
  if (corpus && !rs.weightsMeta.empty())
    if (int code = checkVocabularies("train", rs.weightsMeta, rs.weights, data.vocab)) return code;
  if (corpus) recordVocabularies(data.vocab, checkpointMeta);
  // The best validation so far and the count since it, as checkpoints record them.
  auto recordValidation = [&](double bestScore, int64_t since) {
    char record[32];
    std::snprintf(record, sizeof record, "%.17g", bestScore);
    checkpointMeta[kValidationBestKey] = record;
    checkpointMeta[kValidationsSinceBestKey] = std::to_string(since);
    checkpointMeta[kValidationMeasureKey] = validationMeasure;
  };
  // Carried until this run's first validation replaces it.
  if (!std::isnan(resumedBest)) recordValidation(resumedBest, resumedSinceBest);
  checkpointMeta["data_parallel_ranks"] = std::to_string(ranks);
  checkpointMeta["batches_per_step"] = std::to_string(batchesPerStep);
  if (corpus) {
    checkpointMeta[kTrainingDataPrintKey] = hex64(dataDigest);
    checkpointMeta[kTrainingDataWhatKey] = trainingDataWhat(cl, data);
  }
  // checkpoint_<step> files in --save-dir, oldest first (--keep-last): this run's, and, resuming
  // from a checkpoint in that directory, the resumed run's from before the step it resumes at
  // (later ones are left: they are overwritten as the run reaches them).
  std::vector<int64_t> kept;
  std::error_code sameDirError;
  const std::filesystem::path resumeDir = std::filesystem::path(resume).parent_path();
  const bool resumedHere = !resume.empty() && !saveDir.empty() &&
                           std::filesystem::equivalent(resumeDir.empty() ? "." : resumeDir, saveDir, sameDirError);
  if (keepLast > 0 && leader && resumedHere) {  // not another run's files (a new run, or a resume from elsewhere)
    std::error_code ec;
    for (const auto &entry : std::filesystem::directory_iterator(saveDir, ec)) {
      const std::string name = entry.path().filename().string();
      const std::string prefix = "checkpoint_";
      if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
          name.find_first_not_of("0123456789", prefix.size()) != std::string::npos || name.size() > prefix.size() + 12)
        continue;
      const int64_t step = std::strtoll(name.c_str() + prefix.size(), nullptr, 10);
      if (step < firstStep && name == prefix + std::to_string(step)) kept.push_back(step);
    }
    std::sort(kept.begin(), kept.end());
  }
  int64_t lastSaved = resume.empty() ? 0 : firstStep - 1;  // the step the checkpoint on disk holds
  auto save = [&](int64_t step) {
    if (!leader) return 0;  // one writer: the checkpoint is the same model on every rank
    if (auto s = model->saveCheckpoint(checkpoint, step, checkpointMeta); !s.ok()) return fail("train", s);
    lastSaved = step;
    std::printf("checkpoint %s (step %lld)\n", checkpoint.c_str(), (long long)step);
    if (keepLast > 0) {
      const std::string numbered = saveDir + "/checkpoint_" + std::to_string(step);
      if (auto s = model->saveCheckpoint(numbered, step, checkpointMeta); !s.ok()) return fail("train", s);
      kept.push_back(step);
      while (int64_t(kept.size()) > keepLast) {
        std::remove((saveDir + "/checkpoint_" + std::to_string(kept.front())).c_str());
        kept.erase(kept.begin());
      }
    }
    return 0;
  };
  // Validation: loss, and greedy BLEU with --valid-bleu; the best so far (BLEU if measured, else
  // loss) is kept as checkpoint_best; --patience N stops after N validations without a new best.
  auto trainStart = std::chrono::steady_clock::now();
  double best = resumedBest;
  int64_t sinceBest = resumedSinceBest;
  bool stop = false;
  bool outputClosed = false;
  auto evaluate = [&](int64_t step) {
    tfmrt::Status s;
    const double loss = validationLoss(*model, data.valid, s);
    if (!s.ok()) return fail("train", s);
    double bleu = NAN;
    if (validBleu)
      if (auto st = validationBleu(*model, info, data, bleu); !st.ok()) return fail("train", st);
    const double score = validBleu ? bleu : -loss;
    const bool improved = std::isnan(best) || score > best;
    if (improved) {
      best = score;
      sinceBest = 0;
    } else {
      ++sinceBest;
    }
    recordValidation(best, sinceBest);
    std::printf("step %6lld  validation loss %.4f (label-smoothed, per target token)", (long long)step, loss);
    if (validBleu) std::printf("  BLEU %.2f (greedy)", bleu);
    std::printf("%s\n", improved ? "  (best)" : "");
    std::fflush(stdout);
    if (metrics) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - trainStart).count();
      char buf[192];
      std::string line = (std::snprintf(buf, sizeof buf, "{\"step\": %lld, \"valid_loss\": %.6f", (long long)step, loss), buf);
      if (validBleu) line += (std::snprintf(buf, sizeof buf, ", \"valid_bleu\": %.4f", bleu), buf);
      line += (std::snprintf(buf, sizeof buf, ", \"elapsed_s\": %.3f}\n", elapsed), buf);
      writeMetrics(line, step);
    }
    if (improved && !saveDir.empty()) {
      const std::string bestPath = saveDir + "/checkpoint_best";
      if (auto st = model->saveCheckpoint(bestPath, step, checkpointMeta); !st.ok()) return fail("train", st);
      std::printf("checkpoint %s (step %lld, best)\n", bestPath.c_str(), (long long)step);
    }
    if (patience > 0 && sinceBest >= patience) {
      std::printf("early stop at step %lld: %lld validations without improvement\n", (long long)step, (long long)sinceBest);
      stop = true;
    }
    return 0;
  };
  // The gradient clipping, weight decay and schedule (the spec's or the command line's), said where
  // the run starts (the log's grad norm is the norm before clipping, as fairseq's and Marian's).
  char clipping[320] = "";
  if (info.clipNorm > 0) std::snprintf(clipping, sizeof clipping, ", gradients clipped to a norm of %g", info.clipNorm);
  if (info.weightDecay > 0)
    std::snprintf(clipping + std::strlen(clipping), sizeof clipping - std::strlen(clipping), ", weight decay %g",
                  info.weightDecay);
  if (info.scheduleKnown)
    std::snprintf(clipping + std::strlen(clipping), sizeof clipping - std::strlen(clipping),
                  ", learning rate peaks at %.4g at step %lld",
                  tfmrt::scheduledLearningRate(info.lrScale, double(info.dModel), double(info.warmupSteps),
                                               double(info.warmupSteps)),
                  (long long)info.warmupSteps);
  // The dropout rates of the program (the spec's or the command line's), when any is compiled in.
  for (const auto &[rate, what] : {std::pair{info.dropout, "dropout"}, {info.attentionDropout, "attention dropout"},
                                   {info.activationDropout, "activation dropout"}})
    if (rate > 0)
      std::snprintf(clipping + std::strlen(clipping), sizeof clipping - std::strlen(clipping), ", %s %g", what, rate);
  if (corpus)
    std::printf("training %s (%s kernels) on %lld batches per epoch, steps %lld..%lld%s\n", a.modelName.c_str(),
                rs.kernels.c_str(), (long long)data.train.batchesPerEpoch(), (long long)firstStep,
                (long long)(firstStep + steps - 1), clipping);
  else
    std::printf("training %s (%s kernels) on one batch %s src %s tgt, steps %lld..%lld%s\n", a.modelName.c_str(),
                rs.kernels.c_str(), shapeString(inputs[0].shape).c_str(), shapeString(inputs[1].shape).c_str(),
                (long long)firstStep, (long long)(firstStep + steps - 1), clipping);
  if (updateFreq > 1)
    std::printf("gradient accumulation: %lld batches per step\n", (long long)updateFreq);
  if (distributed) {
    std::printf("data-parallel: %lld ranks (%s), %lld batches per step (rank r takes batches r, r + %lld, ...)\n",
                (long long)ranks, comm.library().c_str(), (long long)batchesPerStep, (long long)ranks);
    // Same model, same data, same schedule everywhere, or nothing starts.
    const char *sameFiles = "give every node a copy of the same artifact, corpus and tokenizer";
    if (int code = ranksAgree(comm, "artifact", fileFingerprint(rs.artifactPath), sameFiles)) return code;
    if (int code = ranksAgree(comm, "initial weights", weightsFingerprint(*model),
                              "pass the same --seed, --weights or --resume checkpoint to every rank"))
      return code;
    if (int code = ranksAgree(comm, "training data", dataDigest,
                              "give every node a copy of the same corpus and tokenizer, and every rank the same "
                              "--batch-tokens, --src and --tgt"))
      return code;
    // One by one, so the error names the option that differs.
    const std::pair<const char *, std::string> options[] = {
        {"first step (--first-step, or the --resume checkpoint's)", std::to_string(firstStep)},
        {"step count (--steps, --max-epochs, or the spec's max_steps)", std::to_string(steps)},
        {"--update-freq", std::to_string(updateFreq)},
        {"--check-weights-every", std::to_string(checkWeightsEvery)},
        {"--checkpoint-every", std::to_string(checkpointEvery)},
        {"--eval-every", std::to_string(evalEvery)},
        {"--kernels", rs.kernels},  // other kernels round differently: the ranks' weights drift apart
        {"--lr / --lr-scale, --warmup-steps, --clip-norm, --weight-decay, --adam-betas, --adam-eps, --label-smoothing or "
         "the dropout rates",
         overridesText(rs.trainingOverrides)},
    };
    for (const auto &[option, value] : options)
      if (int code = ranksAgree(comm, option, tfmdist::fingerprint(value.data(), value.size()),
                                "start every rank with the same options"))
        return code;
  }
  if ((firstStep + steps - 1) * updateFreq > INT32_MAX) {
    std::cerr << "tfmc train: error: steps x --update-freq past " << INT32_MAX << " are not supported\n";
    return 2;
  }
  inputs.resize(3);
  inputs.push_back(tfmrt::Tensor::i32({}, {0}));
  // accumulate_gradients also takes the batch's weight and whether it starts the update.
  if (accumulate) {
    inputs.push_back(tfmrt::Tensor::f32({}, {1.0f}));
    inputs.push_back(tfmrt::Tensor::i32({}, {1}));
  }
  std::vector<tfmrt::Tensor> stepOutputs;
  std::vector<tfmdata::Batch> micro(static_cast<size_t>(updateFreq));
  // The gradient sums ("grad_accum/<param>" session states) that ranks add up before the update.
  std::vector<float *> gradientParts;
  std::vector<int64_t> gradientCounts;
  if (distributed || skipNonFinite)
    for (const auto &st : a.states)
      if (st.name.rfind("grad_accum/", 0) == 0) {
        tfmrt::Tensor *t = model->defaultSession().mutableState(st.name);
        if (!t || t->dtype != tfmrt::DType::F32) {
          std::cerr << "tfmc train: error: gradient sum '" << st.name << "' is not an f32 session state\n";
          return 1;
        }
        gradientParts.push_back(t->data<float>());
        gradientCounts.push_back(t->numel());
      }
  int64_t weightChecks = 0, lastChecked = 0;
  double waitMillis = 0;     // time ranks spent waiting for the slowest one (uneven batches)
  double computeMillis = 0;  // this rank's forward and backward passes
  uint64_t lastWeights = 0;
  // --skip-nonfinite: a step whose loss or summed gradient is not finite is not applied. After
  // this many in a row the model has diverged and training stops (skipping would only idle).
  constexpr int64_t kMaxConsecutiveSkips = 10;
  int64_t skippedSteps = 0, consecutiveSkips = 0;
  std::vector<tfmrt::Tensor> outputs;
  std::vector<double> millis;
  double tokens = 0;  // source + target tokens (pad included, as the compute is) over all steps
  float firstLoss = NAN, loss = NAN;
  stopSignals.arm();
  trainStart = std::chrono::steady_clock::now();
  auto lastLog = trainStart;
  double tokensSinceLog = 0;
  for (int64_t k = 0; k < steps; ++k) {
    const int64_t step = firstStep + k;
    int64_t epoch = 0;
    bool skipped = false;
    auto start = std::chrono::steady_clock::now();
    if (!accumulate) {
      if (corpus) {
        // Step s uses batch (s - 1) mod n of epoch (s - 1) / n: a resumed run continues the order.
        const int64_t n = data.train.batchesPerEpoch();
        tfmdata::Batch b = data.train.batch((step - 1) / n, (step - 1) % n);
        epoch = (step - 1) / n + 1;
        inputs[0] = std::move(b.src);
        inputs[1] = std::move(b.tgtIn);
        inputs[2] = std::move(b.tgtOut);
      }
      tokens += double(inputs[0].numel() + inputs[1].numel());
      tokensSinceLog += double(inputs[0].numel() + inputs[1].numel());
      inputs[3].data<int32_t>()[0] = int32_t(step);
      start = std::chrono::steady_clock::now();
      if (auto s = model->run("train_step", inputs, stepOutputs); !s.ok()) return fail("train", s);
      loss = stepOutputs[0].data<float>()[0];
      outputs = {std::move(stepOutputs[0]), std::move(stepOutputs[1])};
    } else {
      // Batch c = (s - 1) B + i R + r is the i-th batch of rank r (of R) in step s, B = R x
      // --update-freq (one process: the order of B = 1, continued). Each adds its gradient weighted
      // by its share of the step's target tokens over all ranks, so the summed update is the
      // gradient of the mean loss over the global batch. Dropout is keyed by c + 1.
      const int64_t n = corpus ? data.train.batchesPerEpoch() : 1;
      auto globalBatch = [&](int64_t i) { return (step - 1) * batchesPerStep + i * ranks + comm.rank(); };
      double targets = 0;
      for (int64_t i = 0; i < updateFreq; ++i) {
        const int64_t c = globalBatch(i);
        if (corpus) {
          micro[size_t(i)] = data.train.batch(c / n, c % n);
        } else {
          micro[size_t(i)].src = inputs[0];
          micro[size_t(i)].tgtIn = inputs[1];
          micro[size_t(i)].tgtOut = inputs[2];
          micro[size_t(i)].tgtTokens = 0;
          const int32_t *t = inputs[2].data<int32_t>();
          for (int64_t j = 0; j < inputs[2].numel(); ++j) micro[size_t(i)].tgtTokens += t[j] != info.padId;
        }
        targets += double(micro[size_t(i)].tgtTokens);
      }
      if (auto s = comm.allreduceSum(&targets, 1); !s.ok()) return fail("train", s);
      epoch = corpus ? ((step - 1) * batchesPerStep + batchesPerStep - 1) / n + 1 : 0;
      start = std::chrono::steady_clock::now();
      double sums[2] = {0, 0};  // this rank's weighted loss and tokens, then the global ones
      for (int64_t i = 0; i < updateFreq; ++i) {
        tfmdata::Batch &b = micro[size_t(i)];
        const double weight = targets > 0 ? double(b.tgtTokens) / targets : 0.0;
        sums[1] += double(b.src.numel() + b.tgtIn.numel());
        inputs[0] = std::move(b.src);
        inputs[1] = std::move(b.tgtIn);
        inputs[2] = std::move(b.tgtOut);
        inputs[3].data<int32_t>()[0] = int32_t(globalBatch(i) + 1);
        inputs[4].data<float>()[0] = float(weight);
        inputs[5].data<int32_t>()[0] = i == 0;
        if (auto s = model->run("accumulate_gradients", inputs, stepOutputs); !s.ok()) return fail("train", s);
        sums[0] += weight * double(stepOutputs[0].data<float>()[0]);
      }
      computeMillis += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (distributed) {
        // The small sum first: it returns when the slowest rank has finished its batches, so its
        // time is the wait for stragglers and the gradient sum's time is the transfer alone.
        const auto waitStart = std::chrono::steady_clock::now();
        if (auto s = comm.allreduceSum(sums, 2); !s.ok()) return fail("train", s);
        waitMillis += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - waitStart).count();
        if (auto s = comm.allreduceSum(gradientParts, gradientCounts); !s.ok()) return fail("train", s);
      }
      tokens += sums[1];
      tokensSinceLog += sums[1];
      const double stepLoss = sums[0];
      if (skipNonFinite) {
        // Ranks hold the same sums here, so they take the same decision.
        // x * 0 is 0 for every finite x and NaN for NaN and +-inf: one branch-free pass (an
        // integer OR the compiler can vectorise) instead of an early-exit test per element.
        int nonFinite = 0;
        for (size_t p = 0; p < gradientParts.size(); ++p)
          for (int64_t j = 0; j < gradientCounts[p]; ++j) {
            const float z = gradientParts[p][j] * 0.0f;
            nonFinite |= z != z;
          }
        skipped = !std::isfinite(stepLoss) || nonFinite;
      }
      loss = float(stepLoss);
      if (skipped) {
        outputs = {tfmrt::Tensor::f32({}, {loss}), tfmrt::Tensor::f32({}, {NAN})};
      } else {
        if (auto s = model->run("apply_update", {tfmrt::Tensor::i32({}, {int32_t(step)})}, stepOutputs); !s.ok())
          return fail("train", s);
        outputs = {tfmrt::Tensor::f32({}, {loss}), std::move(stepOutputs[0])};
      }
    }
    millis.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (k == 0 && steps > 1 && rs.profile) model->resetProfile();  // as the median: without the first step's set-up
    if (k == 0) firstLoss = loss;
    const double sqNorm = double(outputs[1].data<float>()[0]);
    if (skipped) {
      ++skippedSteps;
      ++consecutiveSkips;
      std::printf("step %6lld  skipped: the %s is not finite (loss %g); weights and optimizer state unchanged, %lld "
                  "step(s) skipped so far\n",
                  (long long)step, std::isfinite(loss) ? "gradient" : "loss", double(loss), (long long)skippedSteps);
      std::fflush(stdout);
      if (consecutiveSkips >= kMaxConsecutiveSkips) {
        std::cerr << "tfmc train: error: " << kMaxConsecutiveSkips << " steps in a row (" << step - kMaxConsecutiveSkips + 1
                  << ".." << step << ") had a non-finite loss or gradient: training has diverged. The weights are "
                  << "those after step " << step - kMaxConsecutiveSkips << ", the last step applied";
        if (!checkpoint.empty() && lastSaved > 0)
          std::cerr << "; " << checkpoint << " holds step " << lastSaved << " (lower the learning rate and --resume it)";
        std::cerr << "\n";
        return 1;
      }
    } else {
      consecutiveSkips = 0;
    }
    if (!skipped && (!std::isfinite(loss) || !std::isfinite(sqNorm))) {
      // The step already updated the weights in place: stop before anything is saved.
      const std::string param = firstNonFiniteParameter(*model);
      std::cerr << "tfmc train: error: step " << step << ": " << (std::isfinite(loss) ? "the gradient" : "the loss")
                << " is not finite (loss " << loss << ", gradient norm " << std::sqrt(sqNorm) << ")";
      if (!param.empty()) std::cerr << "; the first non-finite parameter after the update is '" << param << "'";
      std::cerr << ". Nothing was saved";
      if (!checkpoint.empty() && lastSaved > 0)
        std::cerr << "; " << checkpoint << " still holds step " << lastSaved << " (lower the learning rate and --resume it)";
      std::cerr << "\n";
      return 1;
    }
    // Schedules count absolute steps, so a resumed run logs, evaluates and saves where an
    // uninterrupted one would.
    if (!skipped && (k == 0 || step % logEvery == 0 || k + 1 == steps)) {
      // Deterministic fields first (a resumed run prints them identically), timings last.
      const auto now = std::chrono::steady_clock::now();
      const double elapsed = std::chrono::duration<double>(now - trainStart).count();
      const double interval = std::chrono::duration<double>(now - lastLog).count();
      const double tokPerSec = interval > 0 ? tokensSinceLog / interval : 0.0;
      const double eta = elapsed / double(k + 1) * double(steps - k - 1);
      const double gradNorm = std::sqrt(sqNorm);
      const double lr = info.scheduleKnown ? tfmrt::scheduledLearningRate(info.lrScale, double(info.dModel),
                                                                          double(info.warmupSteps), double(step))
                                           : 0.0;
      std::string fields;
      char buf[128];
      if (info.clipNorm > 0 && gradNorm > info.clipNorm) fields += " (clipped)";
      if (corpus) fields += (std::snprintf(buf, sizeof buf, "  epoch %lld", (long long)epoch), buf);
      if (info.scheduleKnown) fields += (std::snprintf(buf, sizeof buf, "  lr %.3e", lr), buf);
      std::printf("step %6lld  loss %.6f  grad norm %.4g%s  %.0f tok/s  elapsed %s  eta %s  %.1f ms\n", (long long)step,
                  loss, gradNorm, fields.c_str(), tokPerSec, clockTime(elapsed).c_str(), clockTime(eta).c_str(),
                  millis.back());
      std::fflush(stdout);  // progress shows up when the output goes to a file or a pipe
      if (metrics) {
        char line[320];
        std::snprintf(line, sizeof line,
                      "{\"step\": %lld, \"epoch\": %lld, \"lr\": %.6e, \"loss\": %.6f, \"grad_norm\": %.6g, "
                      "\"tokens_per_s\": %.1f, \"elapsed_s\": %.3f}\n",
                      (long long)step, (long long)epoch, lr, loss, gradNorm, tokPerSec, elapsed);
        writeMetrics(line, step);
      }
      lastLog = now;
      tokensSinceLog = 0;
    }
    if (leader && data.hasValid && evalEvery > 0 && step % evalEvery == 0)
      if (int code = evaluate(step)) return code;
    if (timeLimitSeconds > 0 && !stop &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - trainStart).count() >= timeLimitSeconds) {
      std::printf("time limit %s reached after step %lld\n", cl.get("time-limit").c_str(), (long long)step);
      stop = true;
    }
    // Standard output closed: stop as for a signal (a log pipe that died ended the run unsaved).
    if (!outputClosed && std::ferror(stdout)) {
      outputClosed = true;
      stop = true;
    }
    bool interrupted = gStopSignal != 0;
    int stopSignal = gStopSignal;
    if (distributed) {
      // Stopping is collective: a signal that reached one rank, or rank 0's early stop, ends the
      // job after this step on every rank (each waits for the others in the next step otherwise).
      double flags[3] = {gStopSignal == SIGINT ? 1.0 : 0.0, gStopSignal == SIGTERM ? 1.0 : 0.0, stop ? 1.0 : 0.0};
      if (auto s = comm.allreduceSum(flags, 3); !s.ok()) return fail("train", s);
      interrupted = flags[0] + flags[1] > 0;
      stopSignal = flags[0] > 0 ? SIGINT : SIGTERM;
      stop = flags[2] > 0;
      if (k + 1 == steps || stop || interrupted || (checkWeightsEvery > 0 && step % checkWeightsEvery == 0)) {
        lastWeights = weightsFingerprint(*model);
        const std::string what = "weights after step " + std::to_string(step);
        if (int code = ranksAgree(comm, what.c_str(), lastWeights,
                                  "the ranks diverged (a non-deterministic reduction or a corrupted rank); resume "
                                  "from the last checkpoint"))
          return code;
        ++weightChecks;
        lastChecked = step;
      }
    }
    if (!checkpoint.empty() &&
        (k + 1 == steps || stop || interrupted || (checkpointEvery > 0 && step % checkpointEvery == 0)))
      if (int code = save(step)) return code;
    if (outputClosed) {
      std::fprintf(stderr, "tfmc train: error: cannot write standard output (a closed pipe or a full disk); stopped after "
                   "step %lld: %s\n",
                   (long long)step,
                   checkpoint.empty() ? "no --checkpoint or --save-dir, nothing saved"
                                      : ("resume with --resume " + checkpoint).c_str());
      return 1;
    }
    if (interrupted) {
      const int sig = stopSignal;
      // Every rank waits for rank 0's checkpoint: a rank that exits non-zero first makes mpirun
      // end the others.
      if (distributed) {
        double done = 1;
        if (auto s = comm.allreduceSum(&done, 1); !s.ok()) return fail("train", s);
      }
      std::printf("interrupted by %s after step %lld: %s\n", sig == SIGINT ? "SIGINT" : "SIGTERM", (long long)step,
                  checkpoint.empty() ? "no --checkpoint or --save-dir, nothing saved"
                                     : ("resume with --resume " + checkpoint).c_str());
      std::fflush(stdout);
      return 128 + sig;
    }
    if (stop) break;
  }
  std::vector<double> steady(millis.size() > 1 ? millis.begin() + 1 : millis.begin(), millis.end());
  std::sort(steady.begin(), steady.end());
  const double median = steady[steady.size() / 2];
  double total = 0;
  for (double ms : millis) total += ms;
  std::printf("loss %.6f -> %.6f over %lld steps; %.2f ms median per step, %.0f tokens/s overall, load average %s\n",
              firstLoss, loss, (long long)millis.size(), median, tokens / (total / 1000.0), loadAverage().c_str());
  if (skipNonFinite)
    std::printf("skipped %lld of %lld steps for a non-finite loss or gradient\n", (long long)skippedSteps,
                (long long)millis.size());
  if (distributed) {
    std::vector<uint64_t> computeMicros;
    if (auto s = comm.allgather(uint64_t(computeMillis * 1000), computeMicros); !s.ok()) return fail("train", s);
    std::string perRank;
    for (uint64_t us : computeMicros)
      perRank += (perRank.empty() ? "" : " / ") + std::to_string(int64_t(double(us) / 1000 / double(millis.size()) + 0.5));
    std::printf("data-parallel: forward + backward per step on ranks 0..%lld: %s ms\n", (long long)(ranks - 1),
                perRank.c_str());
    std::printf("data-parallel: weights identical on all %lld ranks at %lld checks (last after step %lld, fingerprint "
                "%016llx); per step: gradient allreduce %.2f ms, waiting for the slowest rank %.2f ms\n",
                (long long)ranks, (long long)weightChecks, (long long)lastChecked, (unsigned long long)lastWeights,
                comm.allreduceMillis() / double(millis.size()), waitMillis / double(millis.size()));
  }
  if (leader && data.hasValid && evalEvery <= 0) {
    const int64_t lastStep = firstStep + int64_t(millis.size()) - 1;
    if (int code = evaluate(lastStep)) return code;
    // The checkpoint of that step was written before this validation: again, with its record, so
    // a resume knows the best so far.
    if (!checkpoint.empty() && lastSaved == lastStep)
      if (auto s = model->saveCheckpoint(checkpoint, lastStep, checkpointMeta); !s.ok()) return fail("train", s);
  }
  if (rs.profile) printProfile(*model, millis.size() > 1 ? millis.size() - 1 : 1, "step");
  if (leader && !rs.saveWeights.empty()) {
    if (auto s = model->saveWeights(rs.saveWeights); !s.ok()) return fail("train", s);
    std::printf("wrote %s\n", rs.saveWeights.c_str());
  }
  if (metricsLost) {
    std::cerr << "tfmc train: error: training finished, but the metrics file '" << cl.get("metrics")
              << "' could not be written (see the warning above)\n";
    return 1;
  }
  return 0;
}

// `tfmc tokenizer --data <dir> --langs de,en [--split train] [--vocab N] -o m`:
// one SentencePiece model over both languages' sentences.
int tokenizerCommand(const CommandLine &cl) {
  auto unknown = cl.unknown({"data", "langs", "split", "vocab", "o"});
  if (!unknown.empty()) {
    std::cerr << "tfmc tokenizer: error: unknown option --" << unknown[0] << "\n";
    return 2;
  }
  const std::string dir = cl.get("data"), out = cl.get("o");
  if (dir.empty() || out.empty() || !cl.positionals.empty()) {
    std::cerr << "tfmc tokenizer: error: "
              << (!cl.positionals.empty() ? "unexpected argument '" + cl.positionals[0] + "'"
                  : dir.empty()           ? std::string("--data <corpus dir> is required")
                                          : std::string("-o <model file> is required"))
              << " (usage: tfmc tokenizer --data <dir> [--langs de,en] [--split train] [--vocab 8000] -o <model>)\n";
    return 2;
  }
  // Before the training, which takes minutes on a full corpus.
  if (auto s = tfmrt::checkWritable(out, "tokenizer"); !s.ok()) return fail("tokenizer", s);
  std::vector<std::string> sentences, langs;
  const std::string list = cl.get("langs", "de,en");
  for (size_t start = 0; start <= list.size();) {
    const size_t end = std::min(list.find(',', start), list.size());
    if (end == start) {  // "de,,en", ",de" or "de,": an empty item (it was dropped)
      std::cerr << "tfmc tokenizer: error: --langs '" << list << "' has an empty item (a comma list such as de,en)\n";
      return 2;
    }
    langs.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  const int64_t vocab = cl.getInt("vocab", 8000);
  // pad, bos, eos and unk take ids 0-3 (SentencePiece's own refusals of 0-4 named its source lines).
  if (vocab < 5 || vocab > (int64_t(1) << 24)) {
    std::cerr << "tfmc tokenizer: error: --vocab must be in [5, 16777216] (ids 0-3 are pad, bos, eos and unk), got " << vocab
              << "\n";
    return 2;
  }
  if (langs.empty()) {
    std::cerr << "tfmc tokenizer: error: --langs names no language (a comma list such as de,en)\n";
    return 2;
  }
  for (size_t i = 0; i < langs.size(); ++i)
    if (std::find(langs.begin(), langs.begin() + long(i), langs[i]) != langs.begin() + long(i)) {
      std::cerr << "tfmc tokenizer: error: --langs names '" << langs[i] << "' twice (its corpus would count double)\n";
      return 2;
    }
  // -o naming a corpus file (tokenizer --data d -o d/train.de.gz) replaced the corpus by the model.
  if (auto s = tfmrt::refuseOverwriting(out, "-o file", tfmdata::corpusDirectoryFiles(dir)); !s.ok()) {
    std::cerr << "tfmc tokenizer: error: " << s.message() << "\n";
    return 2;
  }
  const std::string split = cl.get("split", "train");
  for (const std::string &lang : langs) {
    std::vector<std::string> lines;
    std::string path;
    if (auto s = tfmdata::findCorpusSideFile(dir, split, lang, path); !s.ok()) return fail("tokenizer", s);
    if (auto s = tfmdata::readLines(path, lines); !s.ok()) return fail("tokenizer", s);
    sentences.insert(sentences.end(), lines.begin(), lines.end());
  }
  tfmdata::TokenizerOptions options;
  options.vocabSize = int(vocab);
  std::unique_ptr<tfmdata::Tokenizer> tok;
  auto start = std::chrono::steady_clock::now();
  if (auto s = tfmdata::Tokenizer::train(sentences, options, out, tok); !s.ok()) return fail("tokenizer", s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<int32_t> ids;
  (void)tok->encode(sentences.front(), ids);
  std::printf("tokenizer %s: %d pieces from %zu sentences (%s) in %.1f s; \"%s\" -> %zu pieces\n", out.c_str(),
              tok->vocabSize(), sentences.size(), cl.get("langs", "de,en").c_str(), secs, sentences.front().c_str(),
              ids.size());
  return 0;
}

}  // namespace tfmc
