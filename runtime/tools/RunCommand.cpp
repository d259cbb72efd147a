// `tfmc run`, `tfmc demo`, `tfmc inspect`: the runtime half of the CLI (no MLIR here).
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <omp.h>
#include <sched.h>

#include "Commands.h"
#include "RunSupport.h"
#include "SampleIds.h"
#include "tfmdist/communicator.h"
#include "tfmrt/files.h"
#include "tfmrt/runtime.h"
#include "tfmrt/safetensors.h"

namespace tfmc {


// A padded batch with varied lengths, so padding masks are exercised: row b keeps
// max(2, len - 3b mod len/2) tokens. Ids avoid pad/bos/eos.
void makeSampleBatch(const tfmrt::ModelInfo &info, int64_t batch, int64_t srcLen, int64_t tgtLen,
                     uint64_t seed, std::vector<tfmrt::Tensor> &inputs) {
  const int64_t pad = info.padId, bos = info.bosId, eos = info.eosId;
  const int64_t srcVocab = info.srcVocabSize, tgtVocab = info.tgtVocabSize;
  SampleIds srcIds(srcVocab, pad, bos, eos, seed), tgtIds(tgtVocab, pad, bos, eos, seed + 1);
  auto rowLen = [](int64_t len, int64_t b) {
    return std::max<int64_t>(std::min<int64_t>(2, len), len - (3 * b) % (len / 2 + 1));
  };
  std::vector<int32_t> src(batch * srcLen, int32_t(pad)), tgtIn(batch * tgtLen, int32_t(pad)),
      tgtOut(batch * tgtLen, int32_t(pad));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0, n = rowLen(srcLen, b); s < n; ++s) src[b * srcLen + s] = srcIds.next();
    int64_t n = rowLen(tgtLen, b);
    std::vector<int32_t> y(n);
    for (auto &t : y) t = tgtIds.next();
    for (int64_t t = 0; t < n; ++t) {
      tgtIn[b * tgtLen + t] = t == 0 ? int32_t(bos) : y[t - 1];
      tgtOut[b * tgtLen + t] = t == n - 1 ? int32_t(eos) : y[t];
    }
  }
  inputs = {tfmrt::Tensor::i32({batch, srcLen}, src), tfmrt::Tensor::i32({batch, tgtLen}, tgtIn),
            tfmrt::Tensor::i32({batch, tgtLen}, tgtOut)};
}

std::string loadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

namespace {
// Busy and total jiffies of the per-CPU lines of /proc/stat's text, over the CPUs in `allowed`
// (all of them when null), and how many CPUs those are. False when no such line parses.
bool statJiffies(const std::string &stat, const std::vector<int> *allowed, uint64_t &busy, uint64_t &total,
                 int &cpus) {
  std::istringstream in(stat);
  std::string line;
  busy = total = 0;
  cpus = 0;
  while (std::getline(in, line)) {
    if (line.compare(0, 3, "cpu") != 0) break;  // the cpu lines come first
    if (line.size() < 4 || line[3] < '0' || line[3] > '9') continue;  // "cpu ": the all-CPU sum
    std::istringstream fields(line.substr(3));
    int index = -1;
    fields >> index;
    if (allowed && std::find(allowed->begin(), allowed->end(), index) == allowed->end()) continue;
    uint64_t v[8] = {};  // user nice system idle iowait irq softirq steal
    for (uint64_t &x : v)
      if (!(fields >> x)) return false;
    busy += v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    total += v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
    ++cpus;
  }
  return cpus > 0;
}

std::vector<int> allowedCpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof mask, &mask) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  return cpus;
}

std::string readStat() {
  std::ifstream in("/proc/stat");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}
}  // namespace

double busyCoresBetween(const std::string &before, const std::string &after, const std::vector<int> &allowed) {
  const std::vector<int> *only = allowed.empty() ? nullptr : &allowed;
  uint64_t b0 = 0, t0 = 0, b1 = 0, t1 = 0;
  int cpus0 = 0, cpus = 0;
  if (!statJiffies(before, only, b0, t0, cpus0) || !statJiffies(after, only, b1, t1, cpus) || t1 <= t0 || b1 < b0)
    return -1;
  // total is summed over the counted CPUs, so busy / total is the mean load of one of them.
  return double(b1 - b0) / double(t1 - t0) * double(cpus);
}

// Cores kept busy by other processes: /proc/stat's busy time over `seconds` while this process
// sleeps (so all of it is others'), in cores, over the CPUs this process may run on (under a
// cpuset or taskset the machine's other CPUs are not ours to wait for). -1 when /proc/stat cannot
// be read.
static double coresBusyElsewhere(double seconds, const std::vector<int> &allowed) {
  const std::string before = readStat();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  return busyCoresBetween(before, readStat(), allowed);
}

void noticeBusyCores(const char *cmd, int threads) {
  const char *enabled = std::getenv("TFMC_BUSY_NOTICE");  // 0: off (the test suite's setting)
  if (threads <= 1 || (enabled && std::string(enabled) == "0")) return;
  const std::vector<int> allowed = allowedCpus();
  const double busy = coresBusyElsewhere(0.2, allowed);
  const int cores = allowed.empty() ? omp_get_num_procs() : int(allowed.size());
  if (busy < 0.5 || double(cores) - busy >= double(threads) - 0.25) return;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", busy);
  std::cerr << commandName(cmd) << ": notice: other processes keep " << buf << " of " << cores << " cores busy: "
            << threads << " threads wait for each other after every kernel when one is descheduled (beside one "
            << "busy process on 2 cores, a small-model training step took 1.4-1.8 s with 2 threads, 1.0 s with "
            << "--threads 1); fewer threads may be faster (they change the floating-point sums: resume with the "
               "same --threads)\n";
}

uint64_t weightsFingerprint(const tfmrt::Model &model) {
  uint64_t h = tfmdist::fingerprint(nullptr, 0);
  for (const auto &p : model.artifact().params)
    if (const tfmrt::Tensor *w = model.weight(p.name)) h = tfmdist::fingerprint(w->rawData(), w->nbytes(), h);
  return h;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return s + "]";
}

// Kernel time per call of the entry, most expensive first (RuntimeOptions::profile).
void printProfile(const tfmrt::Model &model, size_t calls, const char *per, std::FILE *to) {
  double total = 0;
  std::map<std::string, double> byEntry;
  for (const auto &p : model.profile()) {
    total += p.millis;
    byEntry[p.entry] += p.millis;
  }
  std::fprintf(to, "kernel profile over %zu calls (ms per %s, share):\n", calls, per);
  if (byEntry.size() > 1)  // e.g. translate: encode and decode_step
    for (const auto &[entry, millis] : byEntry)
      std::fprintf(to, "  entry %-38s %8.2f ms  %5.1f%%\n", entry.c_str(), millis / double(calls), 100.0 * millis / total);
  for (const auto &p : model.profile()) {
    const std::string label = byEntry.size() > 1 ? p.entry + ": " + p.kernel : p.kernel;
    std::fprintf(to, "  %-*s %8.2f ms  %5.1f%%  (%lld invocations)\n", byEntry.size() > 1 ? 44 : 28, label.c_str(), p.millis / double(calls),
                100.0 * p.millis / total, (long long)p.calls);
  }
}

bool parseKernels(const char *cmd, const std::string &kernels, tfmrt::KernelBackend &backend) {
  if (kernels == "reference" || kernels == "dnnl") {
    backend = kernels == "reference" ? tfmrt::KernelBackend::Reference : tfmrt::KernelBackend::Dnnl;
    return true;
  }
  std::cerr << commandName(cmd) << ": error: --kernels must be 'dnnl' or 'reference', got '" << kernels << "'\n";
  return false;
}

std::string positionalsGiven(const CommandLine &cl) {
  std::string out = "; got " + std::to_string(cl.positionals.size());
  for (size_t i = 0; i < cl.positionals.size() && i < 4; ++i) out += (i ? ", '" : ": '") + cl.positionals[i] + "'";
  if (cl.positionals.size() > 4) out += ", ...";
  // CLI11 takes '---seed' for an argument: say what it is.
  for (const std::string &p : cl.positionals)
    if (p.rfind("---", 0) == 0) return out + " ('" + p + "' has three dashes: options take two)";
  return out;
}

int fail(const char *cmd, const tfmrt::Status &status) {
  // One write, so the lines of processes sharing a terminal (mpirun ranks) do not interleave.
  const std::string line = commandName(cmd) + ": error: " + status.message() + "\n";
  std::fputs(line.c_str(), stderr);
  return 1;
}

// An error in what the command line asks for, found before any work: exit 2, as for options
// that do not parse.
int failUsage(const char *cmd, const tfmrt::Status &status) {
  fail(cmd, status);
  return 2;
}


void noticePrecisionFallback(const std::string &what, const tfmrt::Model &model, bool forTraining, const char *cmd) {
  const std::string notice = (cmd ? commandName(cmd) + ": " : std::string()) + "notice: " + what;
  const bool reference = model.options().backend == tfmrt::KernelBackend::Reference;
  if (model.bf16RunsAsF32())
    std::cerr << notice << " was compiled with --precision=bf16, but "
              << (reference ? "the reference kernels compute its GEMMs and attention in f32"
                            : "this CPU has no AVX512-BF16 (or ONEDNN_MAX_CPU_ISA caps it): its GEMMs and attention run in f32")
              << "\n";
  // `tfmc train` runs train_step, which is never int8 (its --valid-bleu translations are, silently).
  const tfmrt::Model::Int8Sites int8 = forTraining ? tfmrt::Model::Int8Sites::None : model.int8Sites();
  if (int8 == tfmrt::Model::Int8Sites::InF32)
    std::cerr << notice << " was compiled with --precision=int8, but "
              << (reference ? "the reference kernels compute its int8 GEMMs in f32"
                            : "this CPU has no AVX512-VNNI (or TFMC_INT8_ISA=f32): its int8 GEMMs run in f32")
              << "\n";
  if (int8 == tfmrt::Model::Int8Sites::Portable)
    std::cerr << notice << " was compiled with --precision=int8 and TFMC_INT8_ISA=portable: its "
              << "int8 GEMMs run in plain loops (the same results as AVX512-VNNI, ~20x slower)\n";
}

// Loads the artifact, sets weights (--weights or --seed; --save-weights unless `saveLater`) and
// builds the inputs (--inputs or a sample batch). Returns 0 on success, else the exit code.
// The forward entry's inputs, in order (--inputs names them).
constexpr const char *kInputNames[] = {"src", "tgt_in", "tgt_out"};

int prepareRun(const char *cmd, RunSettings &rs, bool saveLater, std::unique_ptr<tfmrt::Model> &model,
               std::vector<tfmrt::Tensor> &inputs) {
  tfmrt::RuntimeOptions options;
  if (!parseKernels(cmd, rs.kernels, options.backend)) return 2;
  if (!rs.output.empty())
    if (auto s = tfmrt::refuseOverwriting(rs.output, "--output file", {rs.artifactPath, rs.weights, rs.inputs, rs.specPath}); !s.ok())
      return failUsage(cmd, s);
  if (!rs.saveWeights.empty()) {
    if (auto s = tfmrt::refuseOverwriting(rs.saveWeights, "--save-weights file", {rs.artifactPath, rs.inputs, rs.specPath}); !s.ok())
      return failUsage(cmd, s);
    // --save-weights may replace the --weights it started from, but not a checkpoint: weights
    // alone written over it would drop its optimizer state, step and records.
    tfmrt::CheckpointSummary summary;
    if (!rs.weights.empty() && tfmrt::sameFile(rs.saveWeights, rs.weights) &&
        tfmrt::readCheckpointFile(rs.weights, summary).ok() && summary.isCheckpoint)
      return failUsage(cmd, tfmrt::invalidArgument(
                                "the --save-weights file '" + rs.saveWeights + "' is the checkpoint given as --weights ('" +
                                rs.weights + "'): weights alone written over it would lose its optimizer state and step; "
                                "choose another path"));
  }
  if (auto s = tfmrt::refuseSharedOutputs({{rs.output, "--output file"}, {rs.saveWeights, "--save-weights file"}}); !s.ok())
    return failUsage(cmd, s);
  // Before the run (a directory or a missing directory was found only after it).
  for (const auto &[path, what] : {std::pair<const std::string &, const char *>{rs.output, "--output file"},
                                   {rs.saveWeights, "--save-weights file"}})
    if (!path.empty())
      if (auto s = tfmrt::checkWritable(path, what); !s.ok()) return fail(cmd, s);
  options.num_threads = int(rs.threads);  // in [0, kMaxThreads]: readRunSettings
  options.profile = rs.profile;
  if (rs.trainingOverrides.empty()) {
    if (auto s = tfmrt::Model::load(rs.artifactPath, options, model); !s.ok()) return fail(cmd, s);
  } else {
    tfmrt::Artifact artifact;
    if (auto s = tfmrt::readArtifactFile(rs.artifactPath, artifact); !s.ok()) return fail(cmd, s);
    if (auto s = tfmrt::applyTrainingOverrides(artifact, rs.trainingOverrides); !s.ok()) return failUsage(cmd, s);
    if (auto s = tfmrt::Model::fromArtifact(std::move(artifact), options, model); !s.ok()) return fail(cmd, s);
  }
  noticePrecisionFallback(rs.artifactPath, *model, std::string(cmd) == "train");
  const tfmrt::Artifact &a = model->artifact();

  if (!rs.weights.empty()) {
    if (auto s = model->loadWeights(rs.weights, &rs.weightsMeta); !s.ok()) return fail(cmd, s);
  } else if (auto s = model->initWeights(rs.seed); !s.ok()) {
    return fail(cmd, s);
  }
  if (!rs.saveWeights.empty() && !saveLater)
    if (auto s = model->saveWeights(rs.saveWeights); !s.ok()) return fail(cmd, s);

  tfmrt::ModelInfo info;
  if (auto s = tfmrt::readModelInfo(a, info); !s.ok()) return fail(cmd, s);
  if (!rs.inputs.empty()) {
    std::map<std::string, tfmrt::Tensor> tensors;
    if (auto s = tfmrt::readSafetensors(rs.inputs, tensors); !s.ok()) return fail(cmd, s);
    for (const char *name : kInputNames) {
      auto it = tensors.find(name);
      if (it == tensors.end()) {
        std::cerr << commandName(cmd) << ": error: " << rs.inputs << " has no tensor '" << name
                  << "' (expected src, tgt_in, tgt_out as I32 [B, S] / [B, T])\n";
        return 1;
      }
      inputs.push_back(it->second);
    }
  } else {
    int64_t batch = rs.batch > 0 ? rs.batch : info.compileBatch;
    int64_t srcLen = rs.srcLen > 0 ? rs.srcLen : info.compileSrcLen;
    int64_t tgtLen = rs.tgtLen > 0 ? rs.tgtLen : info.compileTgtLen;
    // Checked before the sample batch is built: --batch 100000 --src-len 100000 asked for 40 GB of
    // ids and ended in an uncaught std::bad_alloc.
    if (srcLen > info.maxLen || tgtLen > info.maxLen) {
      std::cerr << commandName(cmd) << ": error: --src-len " << srcLen << " and --tgt-len " << tgtLen
                << " must be at most the model's max_len (" << info.maxLen << ")\n";
      return 2;
    }
    makeSampleBatch(info, batch, srcLen, tgtLen, rs.seed, inputs);
  }
  const std::string source = rs.inputs.empty() ? "input" : rs.inputs;  // what the errors below name
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].shape.size() != 2 || inputs[i].dtype != tfmrt::DType::I32) {
      std::cerr << commandName(cmd) << ": error: " << source << ": '"
                << (i < 3 ? kInputNames[i] : "input") << "' must be token ids, I32 [batch, length] (2-D), got "
                << inputs[i].describe() << "\n";
      return 1;
    }
    // An empty batch "ran" (a loss of 0, steps at 0 tokens): nothing was computed.
    if (inputs[i].shape[0] == 0 || inputs[i].shape[1] == 0) {
      std::cerr << commandName(cmd) << ": error: " << source << ": '"
                << (i < 3 ? kInputNames[i] : "input") << "' is empty (" << inputs[i].describe()
                << "): a batch needs at least one sentence of at least one token\n";
      return 1;
    }
  }
  // One batch: the three agree on the sentence count, and tgt_out is tgt_in shifted (same length).
  if (inputs.size() >= 3) {
    for (size_t i : {1, 2})
      if (inputs[i].shape[0] != inputs[0].shape[0]) {
        std::cerr << commandName(cmd) << ": error: " << source << ": '"
                  << kInputNames[i] << "' has " << inputs[i].shape[0] << " sentences, 'src' has " << inputs[0].shape[0]
                  << " (one batch: the first dimension must agree)\n";
        return 1;
      }
    if (inputs[2].shape[1] != inputs[1].shape[1]) {
      std::cerr << commandName(cmd) << ": error: " << source << ": 'tgt_out' is "
                << inputs[2].shape[1] << " tokens long, 'tgt_in' " << inputs[1].shape[1]
                << " (tgt_out is tgt_in shifted by one: the lengths must agree)\n";
      return 1;
    }
  }
  // A batch whose targets are all padding scores nothing: it trained with a loss of 0, silently.
  if (inputs.size() >= 3) {
    const tfmrt::Tensor &tgtOut = inputs[2];
    const int32_t *ids = tgtOut.data<int32_t>();
    if (std::all_of(ids, ids + tgtOut.numel(), [&](int32_t id) { return id == int32_t(info.padId); })) {
      std::cerr << commandName(cmd) << ": error: " << source
                << ": 'tgt_out' holds only padding (pad_id " << info.padId
                << "): no target token to score, the loss would be 0\n";
      return 1;
    }
  }
  return 0;
}

tfmdata::SearchOptions searchOptions(const tfmrt::ModelInfo &info) {
  tfmdata::SearchOptions search;
  search.beam = int(info.beamSize);
  search.lengthPenalty = info.lengthPenalty;
  search.maxLengthRatio = info.maxLengthRatio;
  search.maxLengthOffset = info.maxLengthOffset;
  search.maxLen = info.maxLen;
  search.pad = int32_t(info.padId);
  search.bos = int32_t(info.bosId);
  search.eos = int32_t(info.eosId);
  return search;
}

int runForward(const char *cmd, RunSettings rs) {
  std::unique_ptr<tfmrt::Model> model;
  std::vector<tfmrt::Tensor> inputs;
  if (int code = prepareRun(cmd, rs, /*saveLater=*/false, model, inputs)) return code;
  if (rs.entry == "gradients" &&
      std::none_of(model->artifact().functions.begin(), model->artifact().functions.end(),
                   [](const tfmrt::EntryFunction &fn) { return fn.name == "gradients"; })) {
    std::cerr << commandName(cmd) << ": error: " << rs.artifactPath
              << " has no gradients entry: compile it with --entries=forward,gradients\n";
    return 1;
  }
  const tfmrt::Artifact &a = model->artifact();
  const int64_t batch = inputs[0].shape[0];
  const int64_t positions = batch * (inputs[0].shape[1] + inputs[1].shape[1]);

  std::vector<tfmrt::Tensor> outputs;
  std::vector<double> millis;
  for (int64_t i = 0; i < std::max<int64_t>(1, rs.iters); ++i) {
    auto start = std::chrono::steady_clock::now();
    if (auto s = model->run(rs.entry, inputs, outputs); !s.ok()) return fail(cmd, s);
    millis.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    // The profile leaves the first call out as the median does (its kernel set-up, oneDNN's JIT,
    // was 27x a forward in the per-call figures).
    if (i == 0 && rs.iters > 1 && rs.profile) model->resetProfile();
  }
  // The first call binds shapes and allocates; report the median of the rest when there are any.
  std::vector<double> steady(millis.size() > 1 ? millis.begin() + 1 : millis.begin(),
                             millis.end());
  std::sort(steady.begin(), steady.end());
  double median = steady[steady.size() / 2];

  // Outputs by the names the compiler gave them: logits, loss, grad:<parameter>.
  std::vector<std::string> names;
  for (const auto &fn : a.functions)
    if (fn.name == rs.entry)
      for (uint32_t v : fn.outputs) names.push_back(fn.values[v].name);
  float loss = NAN;
  double gradSquares = 0;
  int64_t gradTensors = 0;
  for (size_t i = 0; i < names.size() && i < outputs.size(); ++i) {
    if (names[i] == "loss") loss = outputs[i].data<float>()[0];
    if (names[i].rfind("grad:", 0) == 0) {
      ++gradTensors;
      for (int64_t j = 0; j < outputs[i].numel(); ++j)
        gradSquares += double(outputs[i].data<float>()[j]) * outputs[i].data<float>()[j];
    }
  }
  std::printf("model %s (%s kernels), batch %s src %s tgt %s\n", a.modelName.c_str(),
              rs.kernels.c_str(), std::to_string(batch).c_str(),
              shapeString(inputs[0].shape).c_str(), shapeString(inputs[1].shape).c_str());
  if (rs.entry == "forward")
    std::printf("logits %s  loss %.6f  (label-smoothed cross-entropy per target token)\n",
                shapeString(outputs[0].shape).c_str(), loss);
  else
    std::printf("entry %s: loss %.6f, %lld parameter gradients, global L2 norm %.6g\n", rs.entry.c_str(), loss,
                (long long)gradTensors, std::sqrt(gradSquares));
  std::printf("%s: %.2f ms median of %zu%s, %.0f tokens/s (B x (S+T) = %lld positions), "
              "load average %s\n",
              rs.entry.c_str(), median, steady.size(), millis.size() > 1 ? " (after 1 warm-up call)" : "",
              positions / (median / 1000.0), (long long)positions, loadAverage().c_str());
  if (rs.profile) printProfile(*model, millis.size() > 1 ? millis.size() - 1 : 1, "forward");
  if (!std::isfinite(loss)) {
    std::cerr << commandName(cmd) << ": error: the loss is not finite\n";
    return 1;
  }
  if (!rs.output.empty()) {
    std::map<std::string, tfmrt::Tensor> out;
    for (size_t i = 0; i < names.size() && i < outputs.size(); ++i) out[names[i]] = outputs[i];
    if (auto s = tfmrt::writeSafetensors(rs.output, out, {}); !s.ok()) return fail(cmd, s);
    std::printf("wrote %s\n", rs.output.c_str());
  }
  return 0;
}

// Larger sample batches and lengths than any machine here holds (the model refuses what its
// max_len or memory cannot take, with its own message).
constexpr int64_t kMaxRunSize = int64_t(1) << 20;

bool readRunSettings(const char *cmd, const CommandLine &cl, RunSettings &rs,
                     std::vector<std::string> known) {
  for (const char *flag : {"weights", "seed", "inputs", "batch", "src-len", "tgt-len", "kernels",
                           "iters", "output", "save-weights", "threads", "profile", "entry"})
    known.push_back(flag);
  auto unknown = cl.unknown(known);
  if (!unknown.empty()) {
    std::cerr << commandName(cmd) << ": error: unknown option " << (unknown[0] == "o" ? "-" : "--")
              << unknown[0] << (unknown[0] == "o" ? " (use --output to save logits and loss)" : "")
              << "\n";
    return false;
  }
  if (cl.has("weights") && cl.has("seed")) {
    std::cerr << commandName(cmd) << ": error: --weights and --seed are exclusive\n";
    return false;
  }
  rs.weights = cl.get("weights");
  rs.inputs = cl.get("inputs");
  rs.output = cl.get("output");
  rs.saveWeights = cl.get("save-weights");
  rs.kernels = cl.get("kernels", "dnnl");
  if (cl.getInt("seed", 1) < 0) {  // as the spec's training.seed (a negative one was taken, wrapped)
    std::cerr << commandName(cmd) << ": error: --seed must be >= 0, got " << cl.get("seed") << "\n";
    return false;
  }
  rs.seed = uint64_t(cl.getInt("seed", 1));
  rs.batch = cl.getInt("batch", -1);
  rs.srcLen = cl.getInt("src-len", -1);
  rs.tgtLen = cl.getInt("tgt-len", -1);
  rs.iters = cl.getInt("iters", 1);
  rs.threads = cl.getInt("threads", 0);
  // Sizes: -1 (not given) takes the spec's; a given one must be usable (a negative one silently
  // took the spec's, 2^63 - 1 ended in an internal error).
  for (const auto &[flag, value] : {std::pair<const char *, int64_t>{"batch", rs.batch}, {"src-len", rs.srcLen}, {"tgt-len", rs.tgtLen}})
    if (cl.has(flag) && (value < 1 || value > kMaxRunSize)) {
      std::cerr << commandName(cmd) << ": error: --" << flag << " must be in [1, " << kMaxRunSize << "], got " << value << "\n";
      return false;
    }
  // They size the built-in sample batch; a file's tensors have their own shapes (they were ignored).
  if (!rs.inputs.empty())
    for (const char *flag : {"batch", "src-len", "tgt-len"})
      if (cl.has(flag)) {
        std::cerr << commandName(cmd) << ": error: --" << flag
                  << " sizes the built-in sample batch; --inputs brings its own shapes (drop one of them)\n";
        return false;
      }
  if (rs.iters < 1 || rs.iters > INT32_MAX) {  // below 1 was run once silently; above, no bound at all
    std::cerr << commandName(cmd) << ": error: --iters must be in [1, 2147483647], got " << rs.iters << "\n";
    return false;
  }
  if (rs.threads < 0 || rs.threads > tfmrt::kMaxThreads) {
    std::cerr << commandName(cmd) << ": error: --threads must be in [0, " << tfmrt::kMaxThreads << "], got " << rs.threads << "\n";
    return false;
  }
  rs.profile = cl.has("profile");
  rs.entry = cl.get("entry", "forward");
  // run feeds the sample batch (src, tgt_in, tgt_out) that forward and gradients take; another
  // entry failed on its first input's dtype, which did not say what was wrong.
  if (rs.entry != "forward" && rs.entry != "gradients") {
    std::cerr << commandName(cmd) << ": error: --entry must be forward or gradients (the entries that take a batch of "
              << "sentence pairs), got '" << rs.entry << "'\n";
    return false;
  }
  return true;
}

int runCommand(const CommandLine &cl) {
  RunSettings rs;
  if (!readRunSettings("run", cl, rs, {})) return 2;
  if (cl.positionals.size() != 1) {
    std::cerr << "tfmc run: error: expected exactly one artifact (tfmc run <model.tfmx>)" << positionalsGiven(cl) << "\n";
    return 2;
  }
  rs.artifactPath = cl.positionals[0];
  return runForward("run", rs);
}

namespace {
// tfmc inspect on a checkpoint or a weights file: its metadata (step, tokenizer, data
// fingerprint, ...) and tensors. `artifactError` is reported when it is no safetensors file either.
int inspectSafetensors(const std::string &path, const tfmrt::Status &artifactError) {
  tfmrt::CheckpointSummary summary;
  const std::map<std::string, std::string> &meta = summary.metadata;
  const bool &checkpoint = summary.isCheckpoint;
  if (auto s = tfmrt::readCheckpointFile(path, summary); !s.ok()) {
    if (summary.isSafetensors) return fail("inspect", s);  // corrupt, or a checkpoint of another version
    std::cerr << "tfmc inspect: error: '" << path << "' is neither an artifact (" << artifactError.message()
              << ") nor a safetensors file (" << s.message() << ")\n";
    return 1;
  }
  auto field = [&](const char *key) {
    auto it = meta.find(key);
    return it == meta.end() ? std::string("?") : it->second;
  };
  if (checkpoint)
    std::printf("checkpoint %s: model '%s', step %s, checksum verified\n", path.c_str(), field("tfmc_model").c_str(),
                field("step").c_str());
  else
    std::printf("safetensors %s (weights or inputs, not a checkpoint), %s\n", path.c_str(),
                summary.checksumVerified ? "checksum verified" : "no checksum (not written by tfmc)");
  for (const auto &[k, v] : meta) {
    if (k == "training_settings") continue;  // many lines: below
    std::printf("  %s = %s\n", k.c_str(), v.c_str());
  }
  if (meta.count("training_settings")) {
    std::printf("  training settings:\n");
    std::istringstream lines(meta.at("training_settings"));
    for (std::string line; std::getline(lines, line);) std::printf("    %s\n", line.c_str());
  }
  int64_t numbers = 0;
  for (const auto &[name, shape] : summary.shapes) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;  // the parser checked each tensor's size against its bytes
    numbers += n;
  }
  std::printf("%zu tensors, %lld numbers:\n", summary.shapes.size(), (long long)numbers);
  for (const auto &[name, shape] : summary.shapes) std::printf("  %-50s %s\n", name.c_str(), shapeString(shape).c_str());
  return 0;
}
}  // namespace

int inspectCommand(const CommandLine &cl) {
  if (cl.positionals.size() != 1) {
    std::cerr << "tfmc inspect: error: expected exactly one file" << positionalsGiven(cl) << "\n";
    return 2;
  }
  tfmrt::Artifact a;
  if (auto s = tfmrt::readArtifactFile(cl.positionals[0], a); !s.ok()) {
    // Not an artifact: a checkpoint or weights (.safetensors) is summarised instead; a file that
    // starts like an artifact keeps the artifact's error.
    char head[4] = {};
    std::ifstream(cl.positionals[0], std::ios::binary).read(head, sizeof head);
    if (std::string(head, 4) == "TFMX") return fail("inspect", s);
    return inspectSafetensors(cl.positionals[0], s);
  }
  tfmrt::ModelInfo info;
  if (auto s = tfmrt::readModelInfo(a, info); !s.ok()) return fail("inspect", s);
  std::printf("artifact %s: model '%s', format version %u\n", cl.positionals[0].c_str(),
              a.modelName.c_str(), a.formatVersion);
  for (const auto &[k, v] : a.metadata) std::printf("  %s = %s\n", k.c_str(), v.c_str());
  std::printf("%zu parameters:\n", a.params.size());
  for (const auto &p : a.params)
    std::printf("  %-50s %s\n", p.name.c_str(), shapeString(p.shape).c_str());
  std::printf("%zu constants\n", a.constants.size());
  std::printf("%zu session states (? = bound per session):\n", a.states.size());
  for (const auto &st : a.states)
    std::printf("  %-50s %s\n", st.name.c_str(), shapeString(st.shape).c_str());
  for (const auto &fn : a.functions) {
    std::map<std::string, int> counts;
    for (const auto &n : fn.nodes) counts[n.op]++;
    std::printf("entry %s: %zu inputs, %zu outputs, %zu nodes\n", fn.name.c_str(),
                fn.inputs.size(), fn.outputs.size(), fn.nodes.size());
    for (const auto &[op, n] : counts) std::printf("  %-28s %d\n", op.c_str(), n);
  }
  return 0;
}

}  // namespace tfmc
