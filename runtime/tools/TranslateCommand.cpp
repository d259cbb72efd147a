// `tfmc translate`: search (greedy, beam, sampling) over a compiled model's translation entries,
// from a file, a Multi30k split or streaming standard input, with corpus BLEU against references.
#include <errno.h>
#include <omp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <condition_variable>
#include <functional>
#include <iostream>
#include <mutex>
#include <numeric>
#include <sstream>
#include <system_error>
#include <thread>
#include <tuple>

#include "Commands.h"
#include "RunSupport.h"
#include "TokenizerRecord.h"
#include "tfmdata/bleu.h"
#include "tfmdata/corpus.h"
#include "tfmdata/search.h"
#include "tfmdata/text.h"
#include "tfmdata/tokenizer.h"
#include "tfmrt/files.h"

namespace tfmc {
namespace {

enum class OutputFormat { Text, Pieces, Ids };
using InputFormat = OutputFormat;  // --input-format: the same three, read back

// Input problems said once per run on stderr, with the first line number (1-based).
struct InputNotes {
  int64_t invalidUtf8 = 0, firstInvalid = 0, truncated = 0, firstTruncated = 0, unscored = 0, firstUnscored = 0;
  int64_t maxTarget = 0;  // --score-reference: the longest reference the model's max_len can score
  int64_t belowMinLength = 0, firstBelowMinLength = 0, minLength = 0;  // length limit < --min-length
  void report() const {
    const std::string name = commandName("translate");
    const char *tool = name.c_str();
    if (belowMinLength)
      std::fprintf(stderr,
                   "%s: warning: for %lld sentence(s) the length limit (--max-length-ratio x source tokens + "
                   "--max-length-offset) is below --min-length %lld: their outputs end at the limit, without </s> "
                   "(first: line %lld)\n",
                   tool, (long long)belowMinLength, (long long)minLength, (long long)firstBelowMinLength);
    if (invalidUtf8)
      std::fprintf(stderr, "%s: warning: %lld input line(s) had invalid UTF-8, replaced by U+FFFD (first: line %lld)\n",
                   tool, (long long)invalidUtf8, (long long)firstInvalid);
    if (truncated)
      std::fprintf(stderr,
                   "%s: warning: %lld source line(s) longer than the model's max_len were truncated (first: line %lld)\n",
                   tool, (long long)truncated, (long long)firstTruncated);
    if (unscored)
      std::fprintf(stderr,
                   "%s: warning: %lld reference(s) longer than %lld tokens (the model's max_len less BOS and "
                   "</s>) were not scored: 'nan' on their lines, left out of the totals (first: line %lld)\n",
                   tool, (long long)unscored, (long long)maxTarget, (long long)firstUnscored);
  }
};

constexpr int64_t kMaxWorkers = 256;
// The default --workers on many cores: each worker holds its own K/V caches and arenas.
constexpr int64_t kAutoWorkersMax = 8;

// The --workers threads, started once for the whole command: streamed input translates chunk by
// chunk, and new threads per chunk would start new OpenMP pools and grow their per-thread buffers
// again. run(task) runs task(w) for every worker w (w = 0 on the calling thread) and returns when
// all have; a task must not throw.
class WorkerPool {
public:
  explicit WorkerPool(size_t workers) : workers_(workers) {
    try {
      for (size_t w = 1; w < workers; ++w) threads_.emplace_back([this, w] { loop(w); });
    } catch (...) {  // could not start them all: stop those that did, then report
      stop();
      throw;
    }
  }
  ~WorkerPool() { stop(); }
  size_t size() const { return workers_; }
  void run(const std::function<void(size_t)> &task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = &task;
      pending_ = threads_.size();
      ++generation_;
    }
    wake_.notify_all();
    task(0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    task_ = nullptr;
  }

private:
  void loop(size_t w) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(size_t)> *task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        task = task_;
      }
      (*task)(w);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_all();
    }
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto &t : threads_) t.join();
    threads_.clear();
  }

  const size_t workers_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(size_t)> *task_ = nullptr;
  uint64_t generation_ = 0;
  size_t pending_ = 0;
  bool stopping_ = false;
};

struct Job {
  InputNotes notes;
  // One per --workers: each decodes the sentences it claims on its own thread, with its own
  // sessions of the shared models.
  std::vector<tfmdata::Translator *> translators;
  WorkerPool *pool = nullptr;  // their threads (with more than one)
  const tfmdata::SearchOptions &search() const { return translators[0]->options(); }
  // Sources are tokenized with srcTok; outputs, target prefixes and references with tgtTok (the
  // same model for a joint vocabulary).
  const tfmdata::Tokenizer *srcTok = nullptr, *tgtTok = nullptr;
  OutputFormat format = OutputFormat::Text;
  InputFormat inputFormat = InputFormat::Text;
  int nBest = 1;
  bool nBestLines = false;  // "index ||| text ||| score" lines (--n-best, also 1, or --word-scores)
  bool wordScores = false;  // a last field: per-token log-probabilities
  enum class Alignment { None, Hard, Soft } alignment = Alignment::None;  // --alignment: a last field
  int64_t batch = 0, maxBatchTokens = 0;  // batch: set from --batch or the beam
  int64_t maxSentences = 0;               // --max-sentences (0: all)
  bool tsv = false;  // --tsv: input lines are "source<TAB>target prefix"
  int64_t outTokens = 0;
  double logProb = 0;  // --score-reference: summed over the references scored
};

// --input-format pieces|ids: one line of whitespace-separated pieces or ids (line `lineNumber` of
// `side`: "source", "target prefix" or "reference"), already tokenized; BOS, </s> and padding are
// the model's to add.
tfmrt::Status readTokens(const tfmdata::Tokenizer &tok, InputFormat format, const std::string &line, int64_t lineNumber,
                         const char *side, std::vector<int32_t> &out) {
  out.clear();
  const std::string where = std::string(side) + " line " + std::to_string(lineNumber);
  std::istringstream words(line);
  for (std::string word; words >> word;) {
    int64_t id = -1;
    if (format == InputFormat::Pieces) {
      id = tok.pieceId(word);
      if (id < 0)
        return tfmrt::invalidArgument(where + ": '" + word + "' is not a piece of the " +
                                      (std::string(side) == "source" ? "source" : "target") +
                                      " side's vocabulary (--input-format pieces)");
    } else {
      char *end = nullptr;
      errno = 0;
      id = std::strtoll(word.c_str(), &end, 10);
      if (*end || errno == ERANGE || id < 0 || id >= tok.vocabSize())
        return tfmrt::invalidArgument(where + ": '" + word + "' is not a token id (0 to " +
                                      std::to_string(tok.vocabSize() - 1) + "; --input-format ids)");
    }
    if (id == tok.padId() || id == tok.bosId() || id == tok.eosId())
      return tfmrt::invalidArgument(where + ": '" + word +
                                    "' is padding, BOS or </s>, which the model adds itself; give content tokens only");
    out.push_back(int32_t(id));
  }
  return tfmrt::Status::OK();
}

// " ||| " and the log-probabilities, 4 decimals, space-separated (--word-scores).
std::string wordScoreField(const std::vector<double> &scores) {
  std::string field = " |||";
  char value[32];
  for (double v : scores) {
    std::snprintf(value, sizeof value, " %.4f", v);
    field += value;
  }
  return field.size() > 4 ? field : " ||| ";  // an empty field keeps the separator's space
}

// " ||| " and the word alignment (--alignment) of an output of `outputPieces` pieces (its rows:
// those pieces', then </s>'s when it was emitted). `hard`, as fairseq's --print-alignment: for
// each output piece j the source piece i it attends to most (ties: the first) as "i-j", in output
// order, </s> left out on both sides (indices below the piece counts); `soft`, as Marian's: per
// row (</s> included) the weights over the source pieces and </s>, comma-separated, rows
// space-separated.
std::string alignmentField(const Job &job, const std::vector<std::vector<float>> &rows, size_t outputPieces) {
  std::string field = " |||";
  char value[32];
  for (size_t j = 0; j < rows.size(); ++j) {
    const std::vector<float> &w = rows[j];
    if (job.alignment == Job::Alignment::Hard) {
      if (j >= outputPieces || w.size() < 2) continue;  // </s>'s row; a source of </s> alone
      const size_t i = size_t(std::max_element(w.begin(), w.end() - 1) - w.begin());
      field += " " + std::to_string(i) + "-" + std::to_string(j);
      continue;
    }
    field += " ";
    for (size_t i = 0; i < w.size(); ++i) {
      std::snprintf(value, sizeof value, "%s%.4f", i ? "," : "", double(w[i]));
      field += value;
    }
  }
  return field.size() > 4 ? field : " ||| ";  // an empty field keeps the separator's space (split on " ||| ")
}

std::string render(const Job &job, const std::vector<int32_t> &ids) {
  switch (job.format) {
  case OutputFormat::Text: return job.tgtTok->decode(ids);
  case OutputFormat::Pieces: return job.tgtTok->pieces(ids);
  case OutputFormat::Ids: {
    std::string s;
    for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
    return s;
  }
  }
  return "";
}

using Progress = std::function<void(size_t)>;

// A call's sentences, shared by the workers: sources, the tokens given (score()'s targets or the
// prefixes; empty otherwise), sentence ids, and their results.
struct Part {
  std::vector<std::vector<int32_t>> in, forced;
  std::vector<uint64_t> ids;
  std::vector<std::vector<tfmdata::Hypothesis>> out;
};

// Runs `call` on the sentences over job.translators: with several, each takes blocks of them in
// order (longest first) from one shared queue as it needs more (Translator::share), so a worker
// that runs faster takes more and they finish together. Each sentence's result depends on that
// sentence only, so the outputs do not depend on N (tested). `report` gets the number of sentences
// finished by all workers. With one worker it runs on this thread.
tfmrt::Status onWorkers(Job &job, std::vector<std::vector<int32_t>> &in, std::vector<std::vector<int32_t>> &forced,
                        std::vector<uint64_t> &ids, std::vector<std::vector<tfmdata::Hypothesis>> &out,
                        const Progress &report,
                        const std::function<tfmrt::Status(tfmdata::Translator &, Part &, const Progress &)> &call) {
  const size_t workers = std::min(job.translators.size(), std::max<size_t>(in.size(), 1));
  Part all;
  all.in = std::move(in);
  all.forced = std::move(forced);
  all.ids = std::move(ids);
  all.out.assign(all.in.size(), {});  // each worker writes the sentences it claims
  tfmdata::Translator::SharedSentences queue;
  queue.translators = int64_t(workers);
  std::vector<tfmrt::Status> status(workers);
  std::vector<size_t> finished(workers, 0);
  std::mutex progressMutex;
  auto task = [&](size_t w) {
    if (w >= workers) return;  // fewer sentences than workers
    tfmdata::Translator &t = *job.translators[w];
    if (workers > 1) t.share(&queue);
    try {
      status[w] = call(t, all, [&, w](size_t done) {
        std::lock_guard<std::mutex> lock(progressMutex);
        finished[w] = done;
        size_t sum = 0;
        for (size_t f : finished) sum += f;
        if (report) report(sum);
      });
    } catch (const std::bad_alloc &) {
      status[w] = tfmrt::outOfMemory("out of memory while translating");
    } catch (const std::exception &e) {
      status[w] = tfmrt::internalError(std::string("unexpected error while translating: ") + e.what());
    }
    t.share(nullptr);
  };
  if (job.pool) job.pool->run(task);
  else task(0);
  for (const tfmrt::Status &s : status) TFMRT_RETURN_IF_ERROR(s);
  out = std::move(all.out);
  return tfmrt::Status::OK();
}

// Translates `sources` (sentence ids first + i) in batches of similar length; per sentence, the
// rendered lines (one, or nBest "index ||| text ||| score" lines) and the best hypothesis' text.
// With `targets` (--score-reference) it scores them instead: per sentence, its log-probability.
// With `prefixes` (--target-prefix), each output starts with its line's prefix.
tfmrt::Status translateAll(Job &job, const std::vector<std::string> &sources, uint64_t first,
                           std::vector<std::string> &lines, std::vector<std::string> *best, bool progress,
                           const std::vector<std::string> *targets = nullptr,
                           const std::vector<std::string> *prefixes = nullptr) {
  std::vector<std::vector<int32_t>> ids(sources.size()), targetIds(targets ? sources.size() : 0),
      prefixIds(prefixes ? sources.size() : 0);
  const int64_t maxLen = job.search().maxLen, maxSource = maxLen - 1;  // tokens before </s>
  // Line i of a source, prefix or reference file: invalid UTF-8 replaced (noted once), tokenized.
  // Sources in the source vocabulary, prefixes and references in the target's.
  auto encode = [&](const tfmdata::Tokenizer &tok, std::string line, size_t i, const char *side, std::vector<int32_t> &out) {
    if (tfmdata::sanitiseUtf8(line) && job.notes.invalidUtf8++ == 0) job.notes.firstInvalid = int64_t(first + i) + 1;
    if (job.inputFormat == InputFormat::Text) return tok.encode(line, out);
    return readTokens(tok, job.inputFormat, line, int64_t(first + i) + 1, side, out);
  };
  for (size_t i = 0; i < sources.size(); ++i) {
    TFMRT_RETURN_IF_ERROR(encode(*job.srcTok, sources[i], i, "source", ids[i]));
    if (int64_t(ids[i].size()) > maxSource && job.notes.truncated++ == 0) job.notes.firstTruncated = int64_t(first + i) + 1;
    // The search's length limit for this sentence, against --min-length.
    const tfmdata::SearchOptions &o = job.search();
    if (!targets && !prefixes && o.minLength > 0 && !ids[i].empty()) {
      if (o.minLength > tfmdata::outputLengthLimit(o, int64_t(ids[i].size())) && job.notes.belowMinLength++ == 0) {
        job.notes.firstBelowMinLength = int64_t(first + i) + 1;
        job.notes.minLength = o.minLength;
      }
    }
    if (prefixes) TFMRT_RETURN_IF_ERROR(encode(*job.tgtTok, (*prefixes)[i], i, "target prefix", prefixIds[i]));
    if (targets) TFMRT_RETURN_IF_ERROR(encode(*job.tgtTok, (*targets)[i], i, "reference", targetIds[i]));
  }
  std::vector<size_t> order, empty;
  for (size_t i = 0; i < sources.size(); ++i) {
    // An empty (or whitespace-only) line translates to an empty line, as in Marian and
    // CTranslate2; decoding from </s> alone made up a sentence ("A man.").
    if (!targets && ids[i].empty() && (!prefixes || prefixIds[i].empty())) {
      empty.push_back(i);
      continue;
    }
    // A reference is scored whole or not at all (a truncated one would get a wrong score).
    if (targets && int64_t(targetIds[i].size()) > maxLen - 2) {
      job.notes.maxTarget = maxLen - 2;
      if (job.notes.unscored++ == 0) job.notes.firstUnscored = int64_t(first + i) + 1;
      continue;
    }
    order.push_back(i);
  }
  // Longest first: the first sentences size the session's arena and K/V caches for all the
  // others (shortest first grew them again and again: fresh pages zeroed by the kernel each time).
  // The translator keeps up to --batch sentences in flight (and, with --max-batch-tokens, at
  // most that many source tokens counted as sentences x longest), refilling as sentences finish.
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return ids[x].size() > ids[y].size(); });
  std::vector<std::vector<int32_t>> in, forced;
  std::vector<uint64_t> sentenceIds;
  for (size_t k : order) {
    in.push_back(std::move(ids[k]));
    if (targets) forced.push_back(std::move(targetIds[k]));
    if (prefixes) forced.push_back(std::move(prefixIds[k]));
    sentenceIds.push_back(first + k);
  }
  std::vector<std::vector<tfmdata::Hypothesis>> out;
  size_t reported = 0;
  auto report = [&](size_t done) {  // about every --batch sentences, and at the end
    if (!progress || (done < reported + size_t(job.batch) && done != order.size())) return;
    std::fprintf(stderr, "\rtranslated %zu/%zu%s", done, order.size(), done == order.size() ? "\n" : "");
    reported = done;
  };
  // Unscored references: 'nan' and the fields a scored line has, empty.
  lines.assign(sources.size(), targets ? std::string("nan") + (job.wordScores ? " ||| " : "") +
                                             (job.alignment != Job::Alignment::None ? " ||| " : "")
                                       : "");
  // Errors name a reference or prefix by its line (sentence id + 1).
  TFMRT_RETURN_IF_ERROR(onWorkers(job, in, forced, sentenceIds, out, report,
                                  [&](tfmdata::Translator &t, Part &p, const Progress &progressOf) {
                                    if (targets) return t.score(p.in, p.forced, p.out, &p.ids, progressOf);
                                    if (prefixes) return t.translateWithPrefixes(p.in, p.forced, p.out, &p.ids, progressOf);
                                    return t.translate(p.in, p.out, &p.ids, progressOf);
                                  }));
  if (targets) {
    for (size_t i = 0; i < out.size(); ++i) {
      char score[32];
      std::snprintf(score, sizeof score, "%.4f", out[i][0].logProb);
      lines[order[i]] = score;
      if (job.wordScores) lines[order[i]] += wordScoreField(out[i][0].tokenLogProbs);
      if (job.alignment != Job::Alignment::None)
        lines[order[i]] += alignmentField(job, out[i][0].alignment, out[i][0].tokens.size());
      job.logProb += out[i][0].logProb;
      job.outTokens += int64_t(out[i][0].tokens.size()) + 1;
    }
    return tfmrt::Status::OK();
  }
  if (best) best->assign(sources.size(), "");
  for (size_t i = 0; i < out.size(); ++i) {
    const size_t k = order[i];
    std::string &text = lines[k];
    for (size_t h = 0; h < out[i].size() && int(h) < job.nBest; ++h) {
      const std::string rendered = render(job, out[i][h].tokens);
      if (job.nBestLines) {
        char score[32];
        std::snprintf(score, sizeof score, "%.4f", out[i][h].score);
        text += (h ? "\n" : "") + std::to_string(first + k) + " ||| " + rendered + " ||| " + score;
        if (job.wordScores) text += wordScoreField(out[i][h].tokenLogProbs);
      } else {
        text = rendered;
      }
      if (job.alignment != Job::Alignment::None) text += alignmentField(job, out[i][h].alignment, out[i][h].tokens.size());
    }
    if (best && !out[i].empty()) (*best)[k] = job.tgtTok->decode(out[i][0].tokens);
    if (!out[i].empty()) job.outTokens += int64_t(out[i][0].tokens.size()) + 1;
  }
  if (job.nBestLines)  // one empty hypothesis, scored 0 (nothing was decoded)
    for (size_t k : empty)
      lines[k] = std::to_string(first + k) + " |||  ||| 0.0000" + (job.wordScores ? " ||| " : "") +
                 (job.alignment != Job::Alignment::None ? " ||| " : "");
  else if (job.alignment != Job::Alignment::None)
    for (size_t k : empty) lines[k] = " ||| ";
  return tfmrt::Status::OK();
}

// --tsv: input lines `first + 1`.. as "source<TAB>target prefix" (no tab: no prefix), split in place.
tfmrt::Status splitTsv(std::vector<std::string> &sources, uint64_t first, std::vector<std::string> &prefixes) {
  prefixes.assign(sources.size(), "");
  for (size_t i = 0; i < sources.size(); ++i) {
    const size_t tab = sources[i].find('\t');
    if (tab == std::string::npos) continue;
    if (sources[i].find('\t', tab + 1) != std::string::npos)
      return tfmrt::invalidArgument(
          "input line " + std::to_string(first + i + 1) + " has " +
          std::to_string(1 + std::count(sources[i].begin(), sources[i].end(), '\t')) +
          " tab-separated fields; --tsv takes 'source<TAB>target prefix'");
    prefixes[i] = sources[i].substr(tab + 1);
    sources[i].resize(tab);
  }
  return tfmrt::Status::OK();
}

// Standard input, translated as it arrives: whatever complete lines are available (up to a
// batch) are translated and written, in input order, before blocking for more.
int translateStream(Job &job, std::FILE *out) {
  std::string buffer;
  std::vector<std::string> pending;
  uint64_t next = 0;
  bool eof = false;
  uint64_t tooLongLine = 0;  // 1-based; 0: none
  char chunk[65536];
  while (!eof || !pending.empty() || !buffer.empty()) {
    // Read what is there now (block only when nothing is pending).
    for (;;) {
      if (eof) break;
      pollfd p{0, POLLIN, 0};
      const bool wait = pending.empty() && buffer.find('\n') == std::string::npos;
      if (!wait && ::poll(&p, 1, 0) <= 0) break;
      ssize_t n;
      do n = ::read(0, chunk, sizeof chunk);
      while (n < 0 && errno == EINTR);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {  // a non-blocking descriptor: wait for data
        pollfd w{0, POLLIN, 0};
        (void)::poll(&w, 1, -1);
        continue;
      }
      if (n < 0) {  // standard input is a directory, or a read failed: not an empty input
        std::cerr << commandName("translate") << ": error: cannot read standard input: " << std::strerror(errno) << "\n";
        return 1;
      }
      if (n == 0) {
        eof = true;
        break;
      }
      buffer.append(chunk, size_t(n));
      for (size_t pos; (pos = buffer.find('\n')) != std::string::npos;) {
        std::string line = buffer.substr(0, pos);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        pending.push_back(std::move(line));
        buffer.erase(0, pos + 1);
      }
      if (buffer.size() > tfmdata::kMaxLineBytes) {  // the lines before it are translated, then the error
        tooLongLine = next + pending.size() + 1;
        buffer.clear();
        eof = true;
        break;
      }
      if (job.maxSentences > 0 && int64_t(next + pending.size()) >= job.maxSentences) {  // --max-sentences: stop reading
        pending.resize(size_t(job.maxSentences - int64_t(next)));
        buffer.clear();
        eof = true;
        break;
      }
      if (int64_t(pending.size()) >= job.batch) break;
    }
    if (eof && !buffer.empty()) {  // a last line without a newline
      if (buffer.back() == '\r') buffer.pop_back();
      pending.push_back(buffer);
      buffer.clear();
    }
    if (pending.empty()) continue;
    std::vector<std::string> lines, prefixes;
    if (job.tsv)
      if (auto s = splitTsv(pending, next, prefixes); !s.ok()) return fail("translate", s);
    if (auto s = translateAll(job, pending, next, lines, nullptr, false, nullptr, job.tsv ? &prefixes : nullptr); !s.ok())
      return fail("translate", s);
    for (const auto &l : lines) std::fprintf(out, "%s\n", l.c_str());
    if (std::fflush(out) != 0 || std::ferror(out)) {  // a full disk or closed pipe: say so, stop
      std::cerr << commandName("translate") << ": error: cannot write the translations: " << std::strerror(errno) << "\n";
      return 1;
    }
    next += pending.size();
    pending.clear();
  }
  if (tooLongLine) {
    std::cerr << commandName("translate") << ": error: " << tfmdata::lineTooLongMessage(size_t(tooLongLine), "standard input")
              << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int translateCommand(const CommandLine &cl) {
  auto unknown = cl.unknown({"weights", "checkpoint", "tokenizer", "src-tokenizer", "tgt-tokenizer", "input", "reference", "data", "split", "src", "tgt",
                             "beam", "batch", "output", "max-sentences", "kernels", "threads", "length-penalty",
                             "n-best", "output-format", "input-format", "max-batch-tokens", "no-cache", "sample", "top-k", "top-p",
                             "min-length", "no-repeat-ngram-size", "max-length-ratio", "max-length-offset",
                             "temperature", "seed", "profile", "score-reference", "target-prefix", "ensemble-weights",
                             "word-scores", "workers", "alignment", "quiet", "tsv"});
  if (!unknown.empty()) {
    std::cerr << commandName("translate") << ": error: unknown option --" << unknown[0] << "\n";
    return 2;
  }
  // What is missing or conflicting first, then the usage line (it alone left users guessing).
  const std::string vocabularyError = vocabularyOptionsError(cl);
  const char *why = cl.positionals.empty()                     ? "no artifact given"
                    : !namesVocabularies(cl)                   ? "--tokenizer is missing (or --src-tokenizer and --tgt-tokenizer)"
                    : !vocabularyError.empty()                 ? vocabularyError.c_str()
                    : cl.has("weights") && cl.has("checkpoint") ? "give --weights or --checkpoint, not both"
                    : !cl.has("weights") && !cl.has("checkpoint") ? "the weights are missing: give --weights or --checkpoint"
                    : cl.has("input") && cl.has("data")          ? "give --input or --data, not both"
                    : !cl.has("input") && !cl.has("data")        ? "nothing to translate: give --input file (- for standard input) or --data dir"
                    // They were taken and ignored with --input.
                    : cl.has("input") && (cl.has("split") || cl.has("src") || cl.has("tgt"))
                        ? "--split, --src and --tgt choose a file of --data; --input names its file itself"
                        : nullptr;
  if (why) {
    std::cerr << commandName("translate") << ": error: " << why << "\n"
              << "usage: "
              << (translateProgramNamed()
                      ? commandName("translate") + " (--weights w.safetensors | --checkpoint ck) --tokenizer spm.model "
                                                   "[--input file|- | --data dir] [options] (" +
                            commandName("translate") + " --help)\n"
                      : std::string("tfmc translate <model.tfmx> (--weights w.safetensors | --checkpoint "
                                    "ck) --tokenizer spm.model (--input file|- [--reference file] | --data dir [--split "
                                    "test_2016_flickr] [--src de --tgt en]) [--beam 4] [--batch N] [--output file] "
                                    "(tfmc translate --help)\n"));
    return 2;
  }
  // An ensemble: several --weights or --checkpoint, with one artifact for all or one each.
  const bool fromCheckpoints = cl.has("checkpoint");
  const std::vector<std::string> weightFiles = cl.getAll(fromCheckpoints ? "checkpoint" : "weights");
  const size_t members = weightFiles.size();
  if (cl.positionals.size() != 1 && cl.positionals.size() != members) {
    std::cerr << commandName("translate") << ": error: " << cl.positionals.size() << " artifacts for " << members << " "
              << (fromCheckpoints ? "checkpoints" : "weight files")
              << ": give one artifact for all ensemble members, or one per member\n";
    return 2;
  }
  std::vector<double> ensembleWeights;
  if (cl.has("ensemble-weights")) {
    // A trailing comma is an empty last item (getline drops it; ",1" was refused, "1," taken).
    std::stringstream list(cl.get("ensemble-weights") + ",");
    for (std::string item; std::getline(list, item, ',');) {
      char *end = nullptr;
      const double w = std::strtod(item.c_str(), &end);
      if (item.empty() || *end != '\0' || !(w > 0 && w <= 1e30)) {
        std::cerr << commandName("translate") << ": error: --ensemble-weights takes positive numbers up to 1e30, comma-separated; got '" << item
                  << "'\n";
        return 2;
      }
      ensembleWeights.push_back(w);
    }
    if (ensembleWeights.size() != members) {
      std::cerr << commandName("translate") << ": error: " << ensembleWeights.size() << " --ensemble-weights for " << members
                << " ensemble member(s)\n";
      return 2;
    }
  }
  // Options are checked before any work, so a typo does not cost a model load.
  Job job;
  // --output-format and --input-format: text, pieces or ids.
  for (auto [option, into] : {std::pair<const char *, OutputFormat *>{"output-format", &job.format},
                              {"input-format", &job.inputFormat}}) {
    const std::string value = cl.get(option, "text");
    if (value == "text") *into = OutputFormat::Text;
    else if (value == "pieces") *into = OutputFormat::Pieces;
    else if (value == "ids") *into = OutputFormat::Ids;
    else {
      std::cerr << commandName("translate") << ": error: --" << option << " must be text, pieces or ids, got '" << value << "'\n";
      return 2;
    }
  }
  // Options held in an int: a value beyond its range must not wrap into a valid one (--beam
  // 9999999999999 became 1316134911).
  for (const char *name : {"beam", "n-best", "top-k", "no-repeat-ngram-size"}) {
    const long long v = cl.getInt(name, 0);
    if (v < INT32_MIN || v > INT32_MAX) {
      std::cerr << commandName("translate") << ": error: --" << name << " " << v << " is out of range\n";
      return 2;
    }
  }
  job.batch = cl.getInt("batch", 1);  // the default depends on --beam: set below
  job.maxBatchTokens = cl.getInt("max-batch-tokens", 0);
  job.nBest = int(cl.getInt("n-best", 1));
  job.wordScores = cl.has("word-scores");
  if (cl.has("alignment")) {
    const std::string a = cl.get("alignment");
    if (a == "hard") job.alignment = Job::Alignment::Hard;
    else if (a == "soft") job.alignment = Job::Alignment::Soft;
    else {
      std::cerr << commandName("translate") << ": error: --alignment must be hard or soft, got '" << a << "'\n";
      return 2;
    }
  }
  job.nBestLines = cl.has("n-best") || job.wordScores;  // --n-best 1 too: the score is the point
  const bool quiet = cl.has("quiet");  // no "weights from", progress or summary lines on standard error
  const int64_t threads = cl.getInt("threads", 0), workersGiven = cl.getInt("workers", 0);
  job.maxSentences = cl.getInt("max-sentences", 0);
  for (const auto &[flag, bad, rule] : {std::tuple<const char *, bool, const char *>{"batch", job.batch < 1, ">= 1"},
                                        {"n-best", job.nBest < 1, ">= 1"},
                                        {"max-batch-tokens", job.maxBatchTokens < 0, ">= 0 (0: no limit)"},
                                        {"max-sentences", job.maxSentences < 0, ">= 0 (0: all)"},
                                        {"seed", cl.getInt("seed", 0) < 0, ">= 0"},
                                        {"threads", threads < 0, ">= 0 (0: all cores)"},
                                        {"workers", workersGiven < 0 || workersGiven > kMaxWorkers, "in [0, 256] (0: one per core)"}})
    if (bad) {
      std::cerr << commandName("translate") << ": error: --" << flag << " must be " << rule << ", got " << cl.get(flag) << "\n";
      return 2;
    }
  // Sampling's settings without --sample changed nothing (the search ignored them): refuse.
  for (const char *flag : {"top-k", "top-p", "temperature", "seed"})
    if (cl.has(flag) && !cl.has("sample")) {
      std::cerr << commandName("translate") << ": error: --" << flag << " shapes sampling: add --sample (or drop --" << flag << ")\n";
      return 2;
    }
  if (cl.has("reference") && cl.has("data")) {
    std::cerr << commandName("translate") << ": error: --data brings its own references (the --tgt side of --split); --reference "
                 "goes with --input\n";
    return 2;
  }
  if (threads > tfmrt::kMaxThreads) {
    std::cerr << commandName("translate") << ": error: --threads must be in [0, " << tfmrt::kMaxThreads << "], got " << threads << "\n";
    return 2;
  }
  if (cl.has("output")) {  // fail now, not after the whole translation
    std::vector<std::string> inputs = cl.positionals;
    for (const char *flag : {"weights", "checkpoint"})
      for (const std::string &path : cl.getAll(flag)) inputs.push_back(path);
    for (const char *flag : {"tokenizer", "src-tokenizer", "tgt-tokenizer", "input", "reference", "target-prefix"})
      inputs.push_back(cl.get(flag));
    if (cl.get("input") == "-") inputs.push_back("/dev/stdin");  // --input - < X --output X
    // --data's files: its sources and references (--output data/test_2016_flickr.en.gz replaced them).
    for (const std::string &path : tfmdata::corpusDirectoryFiles(cl.get("data"))) inputs.push_back(path);
    if (auto s = tfmrt::refuseOverwriting(cl.get("output"), "--output file", inputs); !s.ok()) {
      fail("translate", s);
      return 2;
    }
    if (auto s = tfmrt::checkWritable(cl.get("output"), "the --output file"); !s.ok()) return fail("translate", s);
  }
  tfmrt::RuntimeOptions options;
  if (!parseKernels("translate", cl.get("kernels", "dnnl"), options.backend)) return 2;
  // By default one worker per core, each on one thread (Marian's --cpu-threads): a translator's
  // threads meet after every kernel, and on a machine where other work holds a core they wait
  // there for a descheduled thread (test_2016 beam 4 beside other processes: 40-60 s on one worker
  // with 2 threads, 10.2 s on two workers). --threads N alone keeps one worker with N threads, and
  // so does --profile (its kernel times are per call of one translator).
  const int64_t workers = workersGiven > 0                    ? workersGiven
                          : threads > 0 || cl.has("profile") ? 1
                                                              : std::clamp<int64_t>(omp_get_max_threads(), 1, kAutoWorkersMax);
  // --workers N without --threads (or with 0): the cores shared out (OpenMP's default count,
  // OMP_NUM_THREADS included, over N; at least one each), not all cores for every worker.
  options.num_threads = workers == 1 || threads > 0 ? int(threads) : std::max(1, omp_get_max_threads() / int(workers));
  options.profile = cl.has("profile");
  // One model per ensemble member (each with its own weights; an artifact given once is loaded
  // once per member). The first one's spec gives the search's defaults.
  std::vector<std::unique_ptr<tfmrt::Model>> models(members);
  std::vector<tfmrt::ModelInfo> infos(members);
  for (size_t i = 0; i < members; ++i) {
    const std::string &path = cl.positionals[cl.positionals.size() == 1 ? 0 : i];
    if (auto s = tfmrt::Model::load(path, options, models[i]); !s.ok()) return fail("translate", s);
    if (i == 0 || cl.positionals.size() > 1) noticePrecisionFallback(path, *models[i]);
    const tfmrt::Artifact &a = models[i]->artifact();
    if (!a.findFunction("encode") || !a.findFunction("decode_step") || !a.findFunction("decode")) {
      std::cerr << commandName("translate") << ": error: " << path << " has no translation entries (compile it with --entries=forward,translate)\n";
      return 1;
    }
    if (auto s = tfmrt::readModelInfo(a, infos[i]); !s.ok()) return fail("translate", s);
    const tfmrt::ModelInfo &first = infos[0], &m = infos[i];
    if (m.srcVocabSize != first.srcVocabSize || m.tgtVocabSize != first.tgtVocabSize || m.padId != first.padId ||
        m.bosId != first.bosId || m.eosId != first.eosId) {
      std::cerr << commandName("translate") << ": error: ensemble members 1 (" << cl.positionals[0] << ") and " << i + 1 << " (" << path
                << ") differ in vocabularies (" << first.srcVocabSize << "/" << first.tgtVocabSize << " vs "
                << m.srcVocabSize << "/" << m.tgtVocabSize << " source/target) or pad/bos/eos ids\n";
      return 1;
    }
  }
  const tfmrt::ModelInfo &info = infos[0];
  tfmdata::SearchOptions search = searchOptions(info);
  for (const tfmrt::ModelInfo &m : infos) search.maxLen = std::min(search.maxLen, m.maxLen);  // every member's limit
  search.beam = int(cl.getInt("beam", info.beamSize));
  search.lengthPenalty = cl.getDouble("length-penalty", info.lengthPenalty);
  search.useCache = !cl.has("no-cache");
  search.alignment = job.alignment != Job::Alignment::None;
  search.nBest = job.nBest;
  search.maxSourceTokens = job.maxBatchTokens;
  search.sample = cl.has("sample");
  search.topK = int(cl.getInt("top-k", 0));
  search.topP = cl.getDouble("top-p", 1.0);
  search.temperature = cl.getDouble("temperature", 1.0);
  search.seed = uint64_t(cl.getInt("seed", 0));
  search.minLength = cl.getInt("min-length", 0);
  search.noRepeatNgram = int(cl.getInt("no-repeat-ngram-size", 0));
  search.maxLengthRatio = cl.getDouble("max-length-ratio", search.maxLengthRatio);
  search.maxLengthOffset = cl.getInt("max-length-offset", search.maxLengthOffset);
  const bool scoring = cl.has("score-reference");
  if (scoring && !cl.has("data") && !cl.has("reference")) {
    std::cerr << commandName("translate") << ": error: --score-reference scores references: give --data, or --input with --reference\n";
    return 2;
  }
  if (scoring && (search.sample || cl.has("n-best"))) {
    std::cerr << commandName("translate") << ": error: --score-reference scores the one reference of each sentence: it takes no "
                 "--sample or --n-best\n";
    return 2;
  }
  if (scoring && cl.has("output-format")) {  // it was taken and ignored
    std::cerr << commandName("translate") << ": error: --score-reference prints a score per line, not text: it takes no "
                 "--output-format\n";
    return 2;
  }
  if (scoring) {  // the search's options were taken and did nothing
    std::string given;
    for (const char *name : {"beam", "length-penalty", "min-length", "no-repeat-ngram-size", "max-length-ratio",
                             "max-length-offset"})
      if (cl.has(name)) given += std::string(given.empty() ? "" : ", ") + "--" + name;
    if (!given.empty()) {
      std::cerr << commandName("translate") << ": error: --score-reference scores the references as they are, with no "
                << "search: drop " << given << "\n";
      return 2;
    }
  }
  if (scoring) search.beam = 1;  // one forced hypothesis per sentence: 128 in flight by default
  if (cl.has("target-prefix") && scoring) {
    std::cerr << commandName("translate") << ": error: --target-prefix starts searched translations; --score-reference "
                 "searches nothing: drop one\n";
    return 2;
  }
  if (cl.has("target-prefix") && (!cl.has("input") || cl.get("input") == "-") && !cl.has("data")) {
    std::cerr << commandName("translate") << ": error: --target-prefix is read line for line beside the sources: give them "
                 "as --input <file> or --data (standard input is translated as it streams in), or stream "
                 "'source<TAB>prefix' lines with --tsv\n";
    return 2;
  }
  job.tsv = cl.has("tsv");
  if (job.tsv && (cl.has("data") || cl.has("target-prefix") || scoring)) {
    std::cerr << commandName("translate") << ": error: --tsv reads 'source<TAB>target prefix' lines from --input; "
              << (cl.has("data") ? "--data has no prefixes: drop one"
                  : cl.has("target-prefix") ? "--target-prefix gives them too: drop one"
                                            : "--score-reference searches nothing: drop one")
              << "\n";
    return 2;
  }
  if (search.sample && !cl.has("beam")) search.beam = 1;
  if (!cl.has("batch")) job.batch = tfmdata::defaultSentencesInFlight(search.beam);
  search.maxSentences = job.batch;
  std::vector<std::unique_ptr<tfmdata::Translator>> translators(static_cast<size_t>(workers));
  std::vector<tfmrt::Model *> memberModels;
  for (auto &m : models) memberModels.push_back(m.get());
  for (auto &translator : translators) {
    if (auto s = tfmdata::Translator::create(memberModels, ensembleWeights, search, translator); !s.ok()) {
      std::cerr << commandName("translate") << ": error: " << s.message() << "\n";
      return 2;
    }
    job.translators.push_back(translator.get());
  }
  std::unique_ptr<WorkerPool> pool;
  if (workers > 1) {
    try {
      pool = std::make_unique<WorkerPool>(size_t(workers));
    } catch (const std::system_error &e) {
      std::cerr << commandName("translate") << ": error: cannot start " << workers << " worker threads: " << e.what() << "\n";
      return 1;
    }
    job.pool = pool.get();
  }
  const std::string workersNote =
      workers > 1 ? ", " + std::to_string(workers) + " workers x " + std::to_string(options.num_threads) +
                        (options.num_threads == 1 ? " thread" : " threads")
                  : std::string();
  // Summed over the workers.
  auto decodeSteps = [&] {
    int64_t steps = 0;
    for (const auto &t : translators) steps += t->decodeSteps();
    return steps;
  };

  Vocabularies vocab;
  if (int code = loadVocabularies("translate", cl, vocab)) return code;
  for (size_t i = 0; i < members; ++i) {
    if (!fromCheckpoints) {
      CheckpointMeta meta;  // a checkpoint given as --weights records its tokenizer too
      if (auto s = models[i]->loadWeights(weightFiles[i], &meta); !s.ok()) return fail("translate", s);
      if (int code = checkVocabularies("translate", meta, weightFiles[i], vocab)) return code;
      continue;
    }
    int64_t step = 0;
    CheckpointMeta meta;
    // The weights only: translation never holds the Adam moments (2 x the weights).
    if (auto s = models[i]->loadCheckpoint(weightFiles[i], step, &meta, /*withTrainingState=*/false); !s.ok())
      return fail("translate", s);
    if (int code = checkVocabularies("translate", meta, weightFiles[i], vocab)) return code;
    if (!quiet) std::fprintf(stderr, "weights from %s (after step %lld)\n", weightFiles[i].c_str(), (long long)step);
  }
  if (members > 1 && !quiet) {
    std::fprintf(stderr, "ensemble of %zu models, weights", members);
    for (size_t i = 0; i < members; ++i)
      std::fprintf(stderr, " %.3g", ensembleWeights.empty() ? 1.0 / double(members) : ensembleWeights[i]);
    std::fprintf(stderr, "%s\n", ensembleWeights.empty() ? " (equal)" : " (normalised to sum 1 in the search)");
  }
  bool sharedTable = false;  // any member's
  for (const auto &m : models) sharedTable = sharedTable || sharesEmbeddingTable(m->artifact());
  if (int code = checkVocabularySizes("translate", vocab, info.srcVocabSize, info.tgtVocabSize, sharedTable)) return code;
  job.srcTok = vocab.src.get();
  job.tgtTok = vocab.tgt;

  // Work counts, times and the kernel profile (--profile): on the report's stream, never among
  // translations on standard output.
  auto printTranslateProfile = [&](std::FILE *to, double secs) {
    tfmdata::Translator::Work w;
    for (const auto &t : translators) w += t->work();
    std::fprintf(to, "work: %lld source positions encoded, %lld decoder rows, %lld decoder positions, %lld memory positions "
                     "re-projected, %lld encode calls\n",
                     (long long)w.encodedPositions, (long long)w.rows, (long long)w.decoderPositions,
                     (long long)w.memoryPositions, (long long)w.encodeCalls);
    if (workers == 1)
      std::fprintf(to, "time: admissions %.3f s (encode %.3f s, slot copies %.3f s), decoder calls %.3f s, search %.3f s, other %.3f s\n",
                       w.admitSeconds, w.encodeSeconds, w.copySeconds, w.stepSeconds, w.searchSeconds,
                       secs - w.admitSeconds - w.stepSeconds - w.searchSeconds);
    else
      std::fprintf(to, "time summed over the %lld workers: admissions %.3f s (encode %.3f s, slot copies %.3f s), decoder "
                       "calls %.3f s, search %.3f s\n",
                       (long long)workers, w.admitSeconds, w.encodeSeconds, w.copySeconds, w.stepSeconds,
                       w.searchSeconds);
    for (size_t i = 0; i < members; ++i) {
      if (members > 1) std::fprintf(to, "ensemble member %zu:\n", i + 1);
      printProfile(*models[i], size_t(decodeSteps()), "decoder call", to);
    }
  };

  if (cl.get("input") == "-" && !cl.has("reference")) {
    std::FILE *out = stdout;
    if (cl.has("output") && !(out = std::fopen(cl.get("output").c_str(), "w"))) {
      std::cerr << commandName("translate") << ": error: cannot write " << cl.get("output") << "\n";
      return 1;
    }
    const auto streamStart = std::chrono::steady_clock::now();
    const int rc = translateStream(job, out);
    job.notes.report();
    if (options.profile && rc == 0)
      printTranslateProfile(stderr, std::chrono::duration<double>(std::chrono::steady_clock::now() - streamStart).count());
    if (out != stdout && std::fclose(out) != 0) {
      std::cerr << commandName("translate") << ": error: cannot write " << cl.get("output") << "\n";
      return 1;
    }
    return rc;
  }

  std::vector<std::string> sources, references;
  std::string what;
  if (cl.has("data")) {
    tfmdata::ParallelCorpus corpus;
    const std::string split = cl.get("split", "test_2016_flickr");
    if (auto s = tfmdata::readParallel(cl.get("data"), split, cl.get("src", "de"), cl.get("tgt", "en"), corpus); !s.ok())
      return fail("translate", s);
    sources = std::move(corpus.src);
    references = std::move(corpus.tgt);
    // The files read (it named <split>.de, which does not exist beside <split>.de.gz).
    what = tfmdata::corpusSideFile(cl.get("data"), split, cl.get("src", "de")) + " -> " +
           tfmdata::corpusSideFile(cl.get("data"), split, cl.get("tgt", "en"));
  } else {
    if (auto s = tfmdata::readLines(cl.get("input") == "-" ? "/dev/stdin" : cl.get("input"), sources); !s.ok())
      return fail("translate", s);
    if (cl.has("reference"))
      if (auto s = tfmdata::readLines(cl.get("reference"), references); !s.ok()) return fail("translate", s);
    what = cl.get("input");
  }
  std::vector<std::string> prefixes;
  if (cl.has("target-prefix"))
    if (auto s = tfmdata::readLines(cl.get("target-prefix"), prefixes); !s.ok()) return fail("translate", s);
  if (job.tsv)
    if (auto s = splitTsv(sources, 0, prefixes); !s.ok()) return fail("translate", s);
  const bool withPrefixes = cl.has("target-prefix") || job.tsv;
  // The first N lines of each file (a reference or prefix file as long as the kept sources will do).
  const int64_t limit = cl.getInt("max-sentences", 0);
  if (limit > 0)
    for (std::vector<std::string> *lines : {&sources, &references, &prefixes})
      if (int64_t(lines->size()) > limit) lines->resize(size_t(limit));
  // References are scored as text: invalid UTF-8 replaced, as in the sources, and said (it was not).
  int64_t invalidReferences = 0, firstInvalidReference = 0;
  for (size_t i = 0; i < references.size(); ++i)
    if (tfmdata::sanitiseUtf8(references[i]) && invalidReferences++ == 0) firstInvalidReference = int64_t(i) + 1;
  if (invalidReferences)
    std::fprintf(stderr, "%s: warning: %lld reference line(s) had invalid UTF-8, replaced by U+FFFD (first: line %lld)\n",
                 commandName("translate").c_str(), (long long)invalidReferences, (long long)firstInvalidReference);
  const std::string sourceLines =
      std::to_string(sources.size()) + " source lines" + (limit > 0 ? " (with --max-sentences)" : "");
  // An empty reference file too: no silent BLEU-less run.
  if (cl.has("reference") && !cl.has("data") && references.size() != sources.size()) {
    std::cerr << commandName("translate") << ": error: " << sourceLines << " in " << what << " but " << references.size()
              << " reference lines in " << cl.get("reference") << "\n";
    return 1;
  }
  if (cl.has("target-prefix") && prefixes.size() != sources.size()) {
    std::cerr << commandName("translate") << ": error: " << sourceLines << " in " << what << " but " << prefixes.size()
              << " target prefix lines in " << cl.get("target-prefix") << "\n";
    return 1;
  }

  std::vector<std::string> lines, hypotheses;
  const auto start = std::chrono::steady_clock::now();
  // Progress ("translated n/N", rewritten in place) only on a terminal: in a log it was one long
  // line of carriage returns.
  const bool progress = !quiet && ::isatty(STDERR_FILENO) == 1;
  if (auto s = translateAll(job, sources, 0, lines, &hypotheses, progress, scoring ? &references : nullptr,
                            withPrefixes ? &prefixes : nullptr);
      !s.ok())
    return fail("translate", s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  job.notes.report();

  if (cl.has("output")) {
    std::ofstream out(cl.get("output"));
    for (const auto &h : lines) out << h << "\n";
    out.flush();  // a full disk shows here or at close, not in the stream's state before
    const bool written = bool(out);
    out.close();
    if (!written || !out) {
      std::cerr << commandName("translate") << ": error: cannot write " << cl.get("output") << ": " << std::strerror(errno) << "\n";
      return 1;
    }
  } else if (!cl.has("data")) {
    for (const auto &h : lines) std::printf("%s\n", h.c_str());
  }
  if (quiet && !(scoring && cl.has("data"))) {
    // --quiet drops the summary line (with --data and --score-reference it is the result: kept).
  } else if (scoring)  // the references' log-probability (natural log, </s> included) and perplexity
    std::fprintf(cl.has("data") ? stdout : stderr,
                 "%s: %zu references scored%s, batch %lld%s, %lld tokens with </s>: log-prob %.2f, %.4f per token, "
                 "perplexity %.2f, %.2f s (%.0f tokens/s, %lld decoder calls), load average %s\n",
                 what.c_str(), sources.size() - size_t(job.notes.unscored), search.useCache ? "" : " (no cache)", (long long)job.batch,
                 workersNote.c_str(),
                 (long long)job.outTokens, job.logProb, job.outTokens ? job.logProb / double(job.outTokens) : NAN,
                 job.outTokens ? std::exp(-job.logProb / double(job.outTokens)) : NAN, secs,
                 double(job.outTokens) / secs, (long long)decodeSteps(), loadAverage().c_str());
  else
  std::fprintf(cl.has("data") ? stdout : stderr,
               "%s: %zu sentences, %s %d%s, batch %lld%s, %.2f s (%.1f sentences/s, %.0f output tokens/s, %lld decoder "
               "calls), load average %s\n",
               what.c_str(), sources.size(), search.sample ? "sampling, beam" : "beam", search.beam,
               search.useCache ? "" : " (no cache)", (long long)job.batch,
               (workersNote + (withPrefixes ? ", target prefixes" : "")).c_str(),
               secs, double(sources.size()) / secs, double(job.outTokens) / secs,
               (long long)decodeSteps(), loadAverage().c_str());
  if (options.profile) printTranslateProfile(cl.has("data") ? stdout : stderr, secs);
  if (!references.empty() && !scoring) {
    // As sacreBLEU 2.6.0 scores it with its defaults (equal on tests/golden/sacrebleu).
    std::FILE *to = cl.has("data") ? stdout : stderr;
    tfmdata::BleuOptions lowercase;
    lowercase.lowercase = true;
    std::fprintf(to, "%s  [%s]\n", tfmdata::corpusBleu(hypotheses, references).format().c_str(),
                 tfmdata::bleuSignature().c_str());
    std::fprintf(to, "lowercased BLEU = %.2f  [%s]\n", tfmdata::corpusBleu(hypotheses, references, lowercase).bleu,
                 tfmdata::bleuSignature(lowercase).c_str());
    std::fprintf(to, "chrF2 = %.2f  [%s]\n", tfmdata::corpusChrf(hypotheses, references), tfmdata::chrfSignature().c_str());
    if (cl.has("data") && !quiet) {
      for (size_t i = 0; i < std::min<size_t>(3, sources.size()); ++i)
        std::printf("  src: %s\n  ref: %s\n  hyp: %s\n", sources[i].c_str(), references[i].c_str(),
                    hypotheses[i].c_str());
      if (!cl.has("output")) std::printf("(the translations: add -o <file>)\n");
    }
  }
  return 0;
}

}  // namespace tfmc
