// Model internals shared by model.cpp (load), model_weights.cpp and model_run.cpp.
#pragma once

#include <map>

#include <memory>
#include <string>
#include <vector>

#include "kernel_registry.h"
#include "kernels/dnnl/dnnl_kernels.h"
#include "shape_inference.h"
#include "tfmrt/runtime.h"

namespace tfmrt {

// A data-dependent check of an entry input, run on every call (token ids within a vocabulary).
struct IdCheck {
  size_t inputPos = 0;   // position in the entry's inputs
  int64_t limit = 0;     // ids must be in [0, limit)
  bool allowPad = false; // `pad` is allowed even if out of range (loss targets)
  int32_t pad = 0;
  size_t node = 0;       // the consuming node, for the message
  std::string what;      // "the vocabulary of 'encoder.embed_tokens.weight'"
};

// Everything that depends on one set of input shapes: value shapes and the buffer arena.
struct ShapePlan {
  std::vector<Shape> inputShapes;  // the cache key
  std::vector<Shape> shapes;       // per value id
  std::vector<size_t> offsets;     // per value id (intermediates)
  Tensor arena;                    // 64-byte aligned bytes
  uint64_t lastUse = 0;
};

struct EntryState {
  const EntryFunction *fn = nullptr;
  std::vector<std::unique_ptr<Kernel>> kernels;  // one per node
  std::vector<IdCheck> idChecks;
  std::vector<std::unique_ptr<ShapePlan>> plans;  // LRU cache
  uint64_t clock = 0;
  // Per-call scratch, sized at load so run() does not allocate.
  std::vector<void *> data;      // per value id
  std::vector<TensorRef> refs;   // operands then results of the node being run
};

struct Model::Impl {
  Artifact artifact;
  RuntimeOptions options;
  DnnlContextPtr dnnl;
  std::vector<Tensor> constants;  // aligned copies of artifact.constants
  std::vector<Tensor> weights;    // per artifact.params index
  bool hasWeights = false;
  uint64_t weightsVersion = 0;
  std::vector<EntryState> entries;
  std::map<std::string, KernelProfile> profile;  // by kernel name, under options.profile

  Status prepareEntry(const EntryFunction &fn, EntryState &state);
  EntryState *findEntry(const std::string &name);
  Status run(const std::string &entry, const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs);
  Status buildShapePlan(EntryState &state, const std::vector<Tensor> &inputs, ShapePlan &plan);
};

// "entry 'forward': " -- the prefix of every run-time error.
inline std::string entryStr(const EntryFunction &fn) { return "entry '" + fn.name + "'"; }

}  // namespace tfmrt
