// Shared by the runtime-side commands (run, demo, train): settings common to all of them and
// the set-up they share (load the artifact, set weights, build inputs). No MLIR here.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "Commands.h"
#include "tfmdata/search.h"
#include "tfmrt/model_info.h"
#include "tfmrt/runtime.h"
#include "tfmrt/training_overrides.h"

namespace tfmc {

struct RunSettings {
  std::string artifactPath;
  std::string weights, inputs, output, saveWeights, kernels = "dnnl", entry = "forward";
  uint64_t seed = 1;
  int64_t batch = -1, srcLen = -1, tgtLen = -1, iters = 1, threads = 0;
  bool profile = false;
  // demo: the spec it compiled (an input no output may replace).
  std::string specPath;
  // train: the training settings the command line sets (--lr, ...; applied to the artifact
  // before its kernels are prepared).
  tfmrt::TrainingOverrides trainingOverrides;
  // Set by prepareRun: the metadata of a checkpoint given as --weights (its tokenizer record).
  std::map<std::string, std::string> weightsMeta;
};

std::string loadAverage();
std::string shapeString(const std::vector<int64_t> &shape);
// Fingerprint of every weight, in parameter order: ranks compare it to prove they hold the same
// model; average refuses one model given twice under two names.
uint64_t weightsFingerprint(const tfmrt::Model &model);
// A notice on stderr when other processes keep so many cores busy that `threads` OpenMP threads
// cannot all run (sampled over 0.2 s): fewer threads are then faster.
void noticeBusyCores(const char *cmd, int threads);
// Cores kept busy between two snapshots of /proc/stat's text, over the CPUs in `allowed` (all when
// empty): busy jiffies over all jiffies of those CPUs, times their count. -1 if either does not parse.
double busyCoresBetween(const std::string &before, const std::string &after, const std::vector<int> &allowed);
// Kernel time per call of the entry, most expensive first (RuntimeOptions::profile).
void printProfile(const tfmrt::Model &model, size_t calls, const char *per, std::FILE *to = stdout);
// --kernels=dnnl|reference; false after printing an error.
bool parseKernels(const char *cmd, const std::string &kernels, tfmrt::KernelBackend &backend);
// One notice line on stderr when `model` was compiled with --precision=bf16 but runs it in f32
// (reference kernels, or a CPU without AVX512-BF16 / ONEDNN_MAX_CPU_ISA capping it), or with
// --precision=int8 but runs it in f32 (reference kernels) or in plain loops (no AVX512-VNNI).
// `what` names the model (its artifact's path); `cmd` prefixes "tfmc <cmd>: " when given.
void noticePrecisionFallback(const std::string &what, const tfmrt::Model &model, bool forTraining = false,
                             const char *cmd = nullptr);
// "; got N: 'a', 'b'" for an error about the number of positional arguments.
std::string positionalsGiven(const CommandLine &cl);
// Prints "tfmc <cmd>: error: <message>" and returns 1.
int fail(const char *cmd, const tfmrt::Status &status);
// The same for a request refused before any work (paths that collide): returns 2.
int failUsage(const char *cmd, const tfmrt::Status &status);
// Parses the options of run-like commands (plus `known` extras); false after printing an error.
bool readRunSettings(const char *cmd, const CommandLine &cl, RunSettings &rs, std::vector<std::string> known);
// Loads the artifact, sets weights (--weights or --seed; --save-weights unless `saveLater`) and
// builds the inputs (--inputs or a sample batch). Returns 0 on success, else the exit code.
int prepareRun(const char *cmd, RunSettings &rs, bool saveLater, std::unique_ptr<tfmrt::Model> &model,
               std::vector<tfmrt::Tensor> &inputs);
// The search settings the artifact records (decoding defaults, special ids, max_len).
tfmdata::SearchOptions searchOptions(const tfmrt::ModelInfo &info);
// Runs the forward (or gradients) entry rs.iters times and prints loss and tokens/s (run, demo).
int runForward(const char *cmd, RunSettings rs);

}  // namespace tfmc
