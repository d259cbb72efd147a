// Model internals shared by model.cpp (load), model_weights.cpp and model_run.cpp.
#pragma once

#include <omp.h>

#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "device.h"
#include "entry_plan.h"
#include "kernel_registry.h"
#include "kernels/fast_kernels.h"
#include "shape_inference.h"
#include "tfmrt/runtime.h"

namespace tfmrt {

// The "format" metadata of a training checkpoint (Model::saveCheckpoint).
constexpr const char *kCheckpointFormat = "tfmc-checkpoint";
// Metadata of the weights files tfmc writes: CRC-32 of their tensors (tensorsCrc).
constexpr const char *kWeightsChecksumKey = "tfmc_crc32";

// A data-dependent check of an entry input, run on every call (token ids within a vocabulary).
struct IdCheck {
  size_t inputPos = 0;   // position in the entry's inputs
  int64_t limit = 0;     // ids must be in [0, limit)
  bool allowPad = false; // `pad` is allowed even if out of range (loss targets)
  int32_t pad = 0;
  size_t node = 0;       // the consuming node, for the message
  std::string what;      // "the vocabulary of 'encoder.embed_tokens.weight'"
};

// Everything that depends on one set of input shapes: value shapes and buffer offsets.
struct ShapePlan {
  std::vector<Shape> inputShapes;  // the cache key, with `threads` and `stateShapes`
  std::vector<Shape> stateShapes;  // of the session's states when planned (per artifact state)
  int threads = 0;                 // OpenMP threads kernel scratch was sized for
  std::vector<Shape> shapes;       // per value id
  std::vector<size_t> offsets;     // per value id (run-time intermediates)
  size_t arenaBytes = 0;           // intermediates, then kernel scratch (in EntryRun::arena)
  size_t scratchOffset = 0, scratchBytes = 0;
  MemoryPlanSummary summary;
  uint64_t lastUse = 0;
};

struct EntryState {
  const EntryFunction *fn = nullptr;
  std::vector<std::unique_ptr<Kernel>> kernels;  // one per node
  // Values known before run() (findKnownBeforeRun): their producing nodes run when weights are
  // set (weightNodes), into `derived` (per value id; empty unless a known intermediate), which
  // no arena ever holds. run() executes runNodes only.
  std::vector<uint8_t> knownBeforeRun;
  std::vector<size_t> weightNodes, runNodes;
  std::vector<Tensor> derived;
  std::vector<IdCheck> idChecks;
  // Has nodes that update parameters in place (tfm.adam_update): each run makes a new weights
  // version, and every entry refreshes its weight-derived values and packed weights before its
  // next run (preparedVersion).
  bool mutatesWeights = false;
  // Per node: it writes a parameter or a session state in place (tfm.adam_update, the cache
  // writes and reorders, gradient accumulation), so it runs even when no output needs it.
  std::vector<uint8_t> writesInPlace;
  uint64_t preparedVersion = ~uint64_t(0);  // the weightsVersion `derived` and packed weights are of
  // Run, or named by Model::prepare: new weights re-derive it at once. Entries a process never
  // runs (a translation never runs train_step or forward) derive nothing: their packed weight
  // copies were half the load time of `tfmc translate` and a third of its memory.
  bool inUse = false;
  bool usesState = false;       // has State values (their shapes are part of the plan key)
  bool usesDynamicState = false;  // a state with dynamic dims: runs only once bindStates bound them
  bool usesStaticState = false;   // training state (Adam moments): allocated by the first such run
  std::vector<TensorRef> refs;  // operands then results of a node evaluated when weights are set
};

// What one Session keeps per entry: the plans of the input shapes seen and the arena they share.
struct EntryRun {
  std::vector<std::unique_ptr<ShapePlan>> plans;  // LRU cache
  // One arena per entry, shared by its plans (calls run one at a time): grown to the largest plan
  // used so far, so varying batch shapes (a corpus) stop allocating once the largest has been seen.
  Tensor arena;
  uint64_t clock = 0;
  MemoryPlanSummary lastPlan;  // of the most recent run()
  // Per-call scratch, sized when the session is created so run() does not allocate.
  std::vector<void *> data;      // per value id
  std::vector<TensorRef> refs;   // operands then results of the node being run
  std::vector<uint8_t> direct;   // per entry output: computed straight into the caller's tensor
  // run() with a `wanted` mask: the nodes it runs (of runNodes, in order), per mask seen.
  std::map<std::vector<bool>, std::vector<size_t>> prunedNodes;
};

// A readers-writer lock where a waiting writer goes before the readers that come after it: the
// turnstile holds new readers back while a writer waits for the running ones. (glibc's rwlock,
// under std::shared_mutex, prefers readers: 40 weight loads beside back-to-back calls on two
// threads took 3.1 s with it, 0.07 s with the turnstile.)
class CallLock {
public:
  void lock() {
    std::lock_guard<std::mutex> turn(turnstile_);
    rw_.lock();
  }
  void unlock() { rw_.unlock(); }
  void lock_shared() {
    { std::lock_guard<std::mutex> turn(turnstile_); }
    rw_.lock_shared();
  }
  void unlock_shared() { rw_.unlock_shared(); }

private:
  std::mutex turnstile_;
  std::shared_mutex rw_;
};

struct Model::Impl {
  Artifact artifact;
  RuntimeOptions options;
  std::unique_ptr<Device> device;  // the fast backend's CPU device; null for the reference backend
  std::vector<Tensor> constants;  // aligned copies of artifact.constants
  std::vector<Tensor> weights;    // per artifact.params index
  bool hasWeights = false;
  uint64_t weightsVersion = 0;
  std::vector<EntryState> entries;
  std::map<std::pair<std::string, std::string>, KernelProfile> profile;  // by entry and kernel name, under options.profile
  std::unique_ptr<Session> session;  // the one Model::run uses
  // Sessions on several threads run inference entries at once (shared): kernels keep nothing
  // per call (Kernel::run is const; weight-derived copies made on demand are locked inside the
  // kernel). Exclusive: changing the weights or the training state, re-deriving an entry's
  // weight-derived values, a training step (it writes the weights), and any call while
  // profiling (one table for all).
  CallLock callMutex;
  // The entry's weight-derived values predate the current weights (or were never made).
  bool derivedStale(const EntryState &state) const {
    return state.preparedVersion != weightsVersion && (hasWeights || artifact.params.empty());
  }

  Status prepareEntry(const EntryFunction &fn, EntryState &state);
  EntryState *findEntry(const std::string &name);
  size_t entryIndex(const EntryState &state) const { return size_t(&state - entries.data()); }
  // Makes `fresh` the weights (a new weights version), then evaluates the weight-derived values
  // of the entries in use and lets their kernels re-derive cached weights (other entries derive
  // at their first run). On failure the previous weights are restored.
  Status installWeights(std::vector<Tensor> fresh, bool resetTrainingState = true);
  Status installWeightsLocked(std::vector<Tensor> fresh, bool resetTrainingState);  // callMutex held exclusively
  // `given` checked against the parameters (names, dtypes, shapes) and moved into their order.
  Status weightsInOrder(std::map<std::string, Tensor> &&given, std::vector<Tensor> &out) const;
  Status evaluateWeightDerived();                    // every entry in use
  Status evaluateWeightDerived(EntryState &state);  // one entry, for the current weightsVersion (marks it in use)
  // Memory of a value known before run() (parameter, constant, derived); null otherwise.
  void *knownData(const EntryState &state, uint32_t v);
};

// Static states (isStaticState: the Adam moments of train_step) are training state: allocated
// (zeros) on first need -- a run of an entry that uses them, state(), a checkpoint -- so sessions
// that only translate or evaluate never hold them (twice the weights' size); zeroed when weights
// are set, saved in checkpoints. States with dynamic dims (the K/V caches) are transient,
// allocated by bindStates.
struct Session::Impl {
  Model::Impl *model = nullptr;
  // One call at a time per session (its arena and plans): a session shared by two threads (the
  // Model's own, behind Model::run) makes them take turns instead of corrupting each other.
  std::mutex busy;
  std::vector<EntryRun> runs;  // per model entry
  std::vector<Tensor> states;  // per artifact state (empty until allocated or bound)
  bool dynamicBound = false;
  bool staticAllocated = false;
  void allocateStaticStates();  // once; throws std::bad_alloc
  void zeroStaticStates();
  Status run(const std::string &entry, const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs,
             const std::vector<bool> *wanted = nullptr);
  Status buildShapePlan(EntryState &state, const std::vector<Tensor> &inputs, ShapePlan &plan);
};

// Applies RuntimeOptions::num_threads to the calling thread for the duration of a call.
class OmpThreadsScope {
public:
  explicit OmpThreadsScope(int n) : active_(n > 0) {
    if (active_) {
      saved_ = omp_get_max_threads();
      omp_set_num_threads(n);
    }
  }
  ~OmpThreadsScope() {
    if (active_) omp_set_num_threads(saved_);
  }
  OmpThreadsScope(const OmpThreadsScope &) = delete;
  OmpThreadsScope &operator=(const OmpThreadsScope &) = delete;

private:
  bool active_;
  int saved_ = 0;
};

}  // namespace tfmrt
