// The tfmrt runtime API: load a compiled artifact (.tfmx), set its weights, run entry functions.
//
//   std::unique_ptr<tfmrt::Model> model;
//   TFMRT_RETURN_IF_ERROR(tfmrt::Model::load("tiny.tfmx", {}, model));
//   TFMRT_RETURN_IF_ERROR(model->loadWeights("tiny.safetensors"));   // or initWeights(seed)
//   std::vector<tfmrt::Tensor> outputs;
//   TFMRT_RETURN_IF_ERROR(model->run("forward", {src, tgt_in, tgt_out}, outputs));
//
// Nothing here throws: every failure is a Status whose message names the entry function, node
// (index, op, spec location) and tensor involved.
//
// A Model holds what is fixed after load: the program, the kernels, the weights. What changes per
// call lives in a Session: the activation arenas and shape plans of each entry, and the session
// state (tensors kept across calls and updated in place, e.g. the K/V cache of `decode_step`).
// Model::run uses the model's own default session. A Session runs one call at a time (two
// threads calling one session take turns). Sessions of one model run at the same time on
// different threads: their buffers and states are disjoint and the kernels they share keep
// nothing per call, so each thread gets the bits it would get alone (tested). These calls run
// alone instead, waiting for running calls and holding new ones back: changing weights or
// training state (initWeights, setWeights, loadWeights, loadCheckpoint), an entry that writes
// the weights (train_step, apply_update), the first call of an entry after new weights (it
// re-derives their merged copies), and every call while RuntimeOptions::profile is set.
// Each call uses RuntimeOptions::num_threads OpenMP threads: with sessions on N threads, up to
// N x num_threads threads run at once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tfmrt/artifact.h"
#include "tfmrt/status.h"
#include "tfmrt/tensor.h"

namespace tfmrt {

enum class KernelBackend : uint8_t {
  Reference = 0,  // plain loops for every op: the oracle fast kernels are tested against
  Dnnl = 1,       // oneDNN / hand-optimized kernels where one exists, reference elsewhere
};
const char *backendName(KernelBackend backend);

// The most OpenMP threads a model accepts: past the cores they only oversubscribe, and libgomp
// aborts (or the process crashes) when it cannot create them (--threads 50000 / 100000 did).
constexpr int kMaxThreads = 1024;

struct RuntimeOptions {
  KernelBackend backend = KernelBackend::Dnnl;
  int num_threads = 0;  // OpenMP threads used by run(); 0 = the OpenMP default (all cores); <= kMaxThreads
  bool profile = false;  // time every kernel invocation (see Model::profileReport)
  // Dnnl backend, AVX-512 or AVX2 CPUs: products with a packed weight run on tfmc's panel GEMM,
  // at every size in entries without gradients (translation: a row's bits then do not depend on
  // the batch) and up to 256 rows in training entries; false = oneDNN at every size (for
  // comparisons).
  bool few_rows_gemm = true;
  // Dnnl backend, AVX2 CPUs without AVX-512: weight gradients (dW = dy^T x) run on tfmc's blocked
  // kernel; false = oneDNN (for comparisons).
  bool fast_weight_grad = true;
};

// Accumulated kernel time of one op kind in one entry under RuntimeOptions::profile.
struct KernelProfile {
  std::string entry;   // e.g. "encode", "decode_step"
  std::string kernel;  // e.g. "dnnl.linear.packed"; "<kernel> (weights)" for weight-set-time evaluation
  int64_t calls = 0;
  double millis = 0;
};

// What run() would allocate for given input shapes: intermediates share one arena by liveness.
struct MemoryPlanSummary {
  int64_t arena_bytes = 0;               // peak activation memory of these shapes (the entry's
                                         // arena is the largest such plan seen so far)
  int64_t total_intermediate_bytes = 0;  // sum of all intermediate buffers (no reuse)
  int64_t num_buffers = 0;               // intermediates placed in the arena
  // Kernel scratch (e.g. flash attention's per-thread tiles) for the run's thread count, allocated
  // with the arena. Known only with kernels: Model::lastMemoryPlan has it, planArtifactMemory
  // leaves it 0.
  int64_t scratch_bytes = 0;
  int64_t peakBytes() const { return arena_bytes + scratch_bytes; }
};

// Plans entry `entry` of `artifact` for the given input shapes exactly as Model::run would
// (shape inference + liveness-based reuse), without weights or kernels. The compiler uses it to
// report peak activation bytes at the spec's compile shapes.
Status planArtifactMemory(const Artifact &artifact, const std::string &entry,
                          const std::vector<std::vector<int64_t>> &inputShapes,
                          MemoryPlanSummary &summary);

// What a checkpoint's recorded training settings (its metadata from Model::loadCheckpoint) and
// `artifact`'s differ in, as "key old -> new" items (label smoothing, seed, batch tokens, schedule,
// dropout, Adam; not max_steps); empty when they agree or the checkpoint records none (older
// files). A resumed run with other settings would not continue the same run.
std::string trainingSettingsChange(const std::map<std::string, std::string> &checkpointMeta, const Artifact &artifact);
// The same items, each a full metadata key ("train.dropout") with the checkpoint's and the
// artifact's recorded values, in the order trainingSettingsChange names them.
struct TrainingSettingChange {
  std::string key, checkpointValue, artifactValue;
};
std::vector<TrainingSettingChange> trainingSettingChanges(const std::map<std::string, std::string> &checkpointMeta,
                                                          const Artifact &artifact);
std::string describeTrainingSettingChanges(const std::vector<TrainingSettingChange> &changes);

// A checkpoint or weights file read without its model (tfmc inspect): its metadata and tensor
// shapes, a checkpoint's version and the checksum of any file tfmc wrote verified (nothing is
// loaded into memory). `isCheckpoint` is false for other safetensors files (weights, inputs).
struct CheckpointSummary {
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::vector<int64_t>> shapes;
  bool isSafetensors = false;  // it parsed as one (a failed check is then about its contents)
  bool isCheckpoint = false;
  bool checksumVerified = false;  // false: a file tfmc did not write (PyTorch's), which has none
};
Status readCheckpointFile(const std::string &path, CheckpointSummary &summary);

class Session;

class Model {
public:
  ~Model();
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;

  // Reads and validates the artifact, checks every node against the op table and the declared
  // shapes, and prepares one kernel per node (oneDNN primitives are created here, not per call).
  static Status load(const std::string &artifactPath, const RuntimeOptions &options, std::unique_ptr<Model> &model);
  static Status fromArtifact(Artifact artifact, const RuntimeOptions &options, std::unique_ptr<Model> &model);

  // Deterministic initialisation from `seed`, independent of the thread count: Xavier-uniform
  // U(-a, a), a = sqrt(6 / (fan_in + fan_out)), for XavierUniform params (fan_in = shape[1] x
  // receptive field, fan_out = shape[0] x receptive field: PyTorch's convention for [out, in]);
  // zeros / ones; N(0, 1) for Normal. Each parameter's stream is keyed by (seed, parameter name).
  Status initWeights(uint64_t seed);
  // Replaces all weights. Refuses missing, unexpected, mis-shaped or wrongly typed tensors; the
  // message names every offending tensor with both shapes/dtypes. On error the weights are unchanged.
  // Every weights change (this, initWeights, loadWeights) also re-evaluates the nodes computed from
  // weights and constants only (e.g. a tfm.concat of projection weights) and repacks packed weights
  // for the entries in use (run before, or named by prepare()), so run() does neither. Other
  // entries do it at their first run.
  // Training state (the Adam moments of a train_step entry) starts over with new weights, unless
  // `keepTrainingState` (e.g. restoring a checkpoint's weights next to its optimizer state).
  Status setWeights(const std::map<std::string, Tensor> &weights, bool keepTrainingState = false);
  // The same, taking the tensors over instead of copying them (the map is left holding empty ones).
  Status setWeights(std::map<std::string, Tensor> &&weights, bool keepTrainingState = false);
  // A tfmc training checkpoint is accepted too (its weights; checked as loadCheckpoint checks it);
  // `checkpointMeta`, if given, receives its metadata (empty for a plain weights file).
  Status loadWeights(const std::string &safetensorsPath, std::map<std::string, std::string> *checkpointMeta = nullptr);
  Status saveWeights(const std::string &safetensorsPath) const;

  // Training checkpoints: weights + training state (the Adam moments: the static session states of
  // the model's default session, the one Model::run uses) + `step` (the last step taken)
  // + caller metadata, in one safetensors file written atomically (temporary file + rename).
  // The file carries a format tag, a version and a CRC-32 of every tensor's bytes; loading checks
  // them, the model name and every tensor, and changes nothing on any error. A model without
  // training state (no train_step entry) loads the weights only, as does `withTrainingState`
  // false (translation, evaluation: the file is checked all the same; training state this model
  // held starts over, as with setWeights).
  Status saveCheckpoint(const std::string &path, int64_t step, const std::map<std::string, std::string> &meta = {}) const;
  Status loadCheckpoint(const std::string &path, int64_t &step, std::map<std::string, std::string> *meta = nullptr,
                        bool withTrainingState = true);
  bool hasWeights() const;
  const Tensor *weight(const std::string &name) const;  // nullptr if unknown or weights unset
  // Marks `entries` in use: what they compute from the weights alone (concatenated projections,
  // packed weight copies) is derived now, or when weights are set, instead of at their first run.
  // A translator names the entries it runs, so its first sentence does not wait for them, and
  // the entries it never runs (train_step, forward) pack nothing. Unknown names are refused.
  Status prepare(const std::vector<std::string> &entries);

  // Runs entry function `entry`. Inputs are checked against the entry's declared inputs (count,
  // dtype, rank, static dims; token ids within the embedding vocabulary; lengths within the
  // position table). Dynamic dims (batch, lengths) bind per call without recompiling; buffers are
  // planned once per distinct set of input shapes and reused (a small LRU cache of plans), and
  // `outputs` tensors are resized in place, so steady-state calls do not allocate. Results are
  // computed straight into `outputs` where possible (no copy out of the arena); on an error their
  // contents are unspecified.
  Status run(const std::string &entry, const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs);

  // Per-kernel totals since load (or the last reset), most expensive first; empty unless
  // RuntimeOptions::profile is set.
  std::vector<KernelProfile> profile() const;
  void resetProfile();

  const Artifact &artifact() const;
  const RuntimeOptions &options() const;
  // The session Model::run uses (it holds the training state: Adam moments, gradient sums).
  Session &defaultSession();
  // Diagnostics: the kernel chosen for a node ("dnnl.linear.packed", "reference.softmax", ...);
  // empty if the entry or node does not exist.
  std::string kernelName(const std::string &entry, size_t nodeIndex) const;
  // The artifact has bf16 GEMM sites (tfmc compile --precision=bf16) that run in f32 here: the
  // reference backend, or a CPU without AVX512-BF16 (or ONEDNN_MAX_CPU_ISA capped below it).
  bool bf16RunsAsF32() const;
  // How the artifact's int8 GEMM sites (tfmc compile --precision=int8) run here: Native (the
  // AVX512-VNNI kernel), Portable (the plain int8 loops: the same results, ~20x slower; only with
  // TFMC_INT8_ISA=portable) or InF32 (the reference backend, or a CPU without AVX512-VNNI, or
  // TFMC_INT8_ISA=f32: the f32 GEMMs); None without int8 sites.
  enum class Int8Sites { None, Native, Portable, InF32 };
  Int8Sites int8Sites() const;
  // Diagnostics: the memory plan the most recent run() of `entry` used (its arena is what that
  // call allocated, or reused); all zeros before the first run or for an unknown entry.
  MemoryPlanSummary lastMemoryPlan(const std::string &entry) const;

  struct Impl;

private:
  friend class Session;
  Model();
  std::unique_ptr<Impl> impl_;
};

class Session {
public:
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  // A session of `model`, which must outlive it. Allocates arenas on run(), caches on
  // bindStates(), the static states (train_step's Adam moments, zeros) on first use. Training
  // state is the default session's: setWeights & co. zero it and checkpoints hold it; other
  // sessions keep their own.
  static Status create(Model &model, std::unique_ptr<Session> &session);

  // Allocates the artifact's states with dynamic dims, binding each one's dynamic dims in order
  // to `dynamicDims` (the decoder caches are [rows, steps, d_model]: bindStates({rows, steps})).
  // A state already at least that large along every dim is kept (no allocation); its contents
  // are then whatever the last calls left, which the entries that use state never read before
  // writing (decode_step starts from position 0). New states are zero-filled. States without
  // dynamic dims (train_step's Adam moments, "adam.m/<param>") are zeros from their first use
  // (a run of an entry that uses them, state(), a checkpoint): a session that only translates
  // never allocates them.
  Status bindStates(const std::vector<int64_t> &dynamicDims);
  const Tensor *state(const std::string &name) const;  // null if unknown or not bound
  // Writable access between calls, for work the entries leave to the caller: data-parallel
  // training sums the "grad_accum/<param>" states across processes between accumulate_gradients
  // and apply_update. Null if unknown or not bound.
  Tensor *mutableState(const std::string &name);
  int64_t stateBytes() const;                            // all bound or allocated states

  // As Model::run, with this session's buffers and states. Entries that use state refuse to run
  // until bindStates() was called.
  Status run(const std::string &entry, const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs);
  // The same, computing only the outputs marked in `wanted` (one flag per entry output): nodes
  // that none of them depends on are skipped, except those that update state or weights, and
  // outputs not wanted are returned empty (shape {0}). Skipped nodes skip their own checks too;
  // memory is planned for the whole entry. The full-prefix decoder needs only the memory of
  // `encode`, whose other results (every layer's cross K/V) are the cached decoder's.
  Status run(const std::string &entry, const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs,
             const std::vector<bool> &wanted);
  MemoryPlanSummary lastMemoryPlan(const std::string &entry) const;

  struct Impl;
  Impl &internals() { return *impl_; }  // runtime-internal (opaque outside libtfmrt)

private:
  friend class Model;
  Session();
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfmrt
