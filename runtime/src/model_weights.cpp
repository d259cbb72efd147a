// Weight initialisation, loading and saving.
#include <algorithm>
#include <chrono>
#include <memory>

#include "file_io.h"
#include "format.h"
#include "model_impl.h"
#include "safetensors.h"
#include "weight_init.h"

namespace tfmrt {
namespace {

constexpr size_t kMaxListedProblems = 8;

}  // namespace

Status Model::initWeights(uint64_t seed) {
  try {
    const Artifact &a = impl_->artifact;
    std::vector<Tensor> weights(a.params.size());
    for (size_t i = 0; i < a.params.size(); ++i) TFMRT_RETURN_IF_ERROR(initParam(a.params[i], seed, weights[i]));
    return impl_->installWeights(std::move(weights));
  } catch (const std::bad_alloc &) {
    return outOfMemory("out of memory while initialising weights");
  }
}

namespace {

// The first element of a float tensor that is NaN or infinite (all exponent bits set), or -1.
// Such weights were taken: translate printed 'nan' scores and one of four n-best lines.
int64_t firstNonFinite(const Tensor &t) {
  const int64_t n = t.numel();
  if (t.dtype == DType::F32) {
    const uint32_t *bits = t.data<uint32_t>();
    for (int64_t i = 0; i < n; ++i)
      if ((bits[i] & 0x7F800000u) == 0x7F800000u) return i;
  } else if (t.dtype == DType::BF16) {
    const uint16_t *bits = t.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i)
      if ((bits[i] & 0x7F80u) == 0x7F80u) return i;
  }
  return -1;
}

// Why `given` cannot be this model's weights, or OK.
Status checkWeights(const Artifact &a, const std::map<std::string, Tensor> &given) {
  std::vector<std::string> problems;
  size_t nonFinite = 0;
  std::string firstNonFiniteAt;
  for (const ParamInfo &p : a.params) {
    auto it = given.find(p.name);
    if (it == given.end()) {
      problems.push_back(cat("missing tensor '", p.name, "' (expected ", dtypeName(p.dtype), shapeStr(p.shape), ")"));
      continue;
    }
    const Tensor &t = it->second;
    if (t.dtype != p.dtype)
      problems.push_back(cat("tensor '", p.name, "' has dtype ", dtypeName(t.dtype), " but the model expects ",
                             dtypeName(p.dtype)));
    else if (t.shape != p.shape)
      problems.push_back(cat("tensor '", p.name, "' has shape ", shapeStr(t.shape), " but the model expects ",
                             shapeStr(p.shape)));
    else if (!t.valid())
      problems.push_back(cat("tensor '", p.name, "' has storage smaller than its shape ", shapeStr(t.shape)));
    else if (int64_t at = firstNonFinite(t); at >= 0 && nonFinite++ == 0)
      firstNonFiniteAt = cat("'", p.name, "' element ", at);
  }
  if (nonFinite)
    problems.push_back(cat(nonFinite, " tensor(s) hold NaN or infinity (first: ", firstNonFiniteAt,
                           "): these weights cannot translate or train (from a diverged run?)"));
  for (const auto &[name, t] : given)
    if (a.findParam(name) < 0)
      problems.push_back(cat("unexpected tensor '", name, "' ", t.describe(), ": model '", a.modelName,
                             "' has no such parameter"));
  if (!problems.empty()) {
    std::string msg = cat(problems.size(), " weight problem", problems.size() > 1 ? "s" : "", ": ");
    for (size_t i = 0; i < problems.size() && i < kMaxListedProblems; ++i) msg += (i ? "; " : "") + problems[i];
    if (problems.size() > kMaxListedProblems) msg += cat("; and ", problems.size() - kMaxListedProblems, " more");
    return invalidArgument(msg);
  }
  return Status::OK();
}

}  // namespace

Status Model::setWeights(const std::map<std::string, Tensor> &given, bool keepTrainingState) {
  try {
    TFMRT_RETURN_IF_ERROR(checkWeights(impl_->artifact, given));
    std::vector<Tensor> weights;
    weights.reserve(impl_->artifact.params.size());
    for (const ParamInfo &p : impl_->artifact.params) weights.push_back(given.at(p.name));
    return impl_->installWeights(std::move(weights), !keepTrainingState);
  } catch (const std::bad_alloc &) {
    return outOfMemory("out of memory while setting weights");
  }
}

Status Model::Impl::weightsInOrder(std::map<std::string, Tensor> &&given, std::vector<Tensor> &out) const {
  TFMRT_RETURN_IF_ERROR(checkWeights(artifact, given));
  out.clear();
  out.reserve(artifact.params.size());
  for (const ParamInfo &p : artifact.params) out.push_back(std::move(given.at(p.name)));
  return Status::OK();
}

// A checkpoint's or weights file's tensors, read into a map of their own: moved in, not copied
// (a second copy of 31 MB of weights was ~20 % of a one-line `tfmc translate`).
Status Model::setWeights(std::map<std::string, Tensor> &&given, bool keepTrainingState) {
  try {
    std::vector<Tensor> weights;
    TFMRT_RETURN_IF_ERROR(impl_->weightsInOrder(std::move(given), weights));
    return impl_->installWeights(std::move(weights), !keepTrainingState);
  } catch (const std::bad_alloc &) {
    return outOfMemory("out of memory while setting weights");
  }
}

Status Model::loadWeights(const std::string &path, std::map<std::string, std::string> *checkpointMeta) {
  if (checkpointMeta) checkpointMeta->clear();
  auto file = std::make_unique<FileView>();
  TFMRT_RETURN_IF_ERROR(file->open(path, "safetensors file"));
  TensorMap tensors;
  MetadataMap metadata;
  {
    // The header first, copying no tensor: a checkpoint is read by loadCheckpoint, which copies
    // its weights only (its optimizer moments, twice the weights, were copied here and dropped).
    std::map<std::string, TensorInFile> described;
    TFMRT_RETURN_IF_ERROR(parseSafetensorsSelected(
        file->data(), file->size(), [](const std::string &) { return false; }, tensors, described, &metadata, path));
  }
  // A training checkpoint's weights (its optimizer state is checked, not kept): the usual way to
  // start a new run, or evaluate, from a checkpoint.
  if (auto format = metadata.find("format"); format != metadata.end() && format->second == kCheckpointFormat) {
    file.reset();  // unmapped first: mapped twice, its pages counted twice in the peak memory
    int64_t step = 0;
    return loadCheckpoint(path, step, checkpointMeta, /*withTrainingState=*/false);
  }
  tensors.clear();
  TFMRT_RETURN_IF_ERROR(parseSafetensors(file->data(), file->size(), tensors, &metadata, path));
  // Files tfmc wrote carry a checksum (others, such as PyTorch's, do not): a flipped bit in the
  // data was taken silently.
  if (auto crc = metadata.find(kWeightsChecksumKey);
      crc != metadata.end() && crc->second != std::to_string(tensorsCrc(tensors)))
    return dataLoss(cat("weights file '", path, "': checksum mismatch: the file is corrupt"));
  Status s = setWeights(std::move(tensors));
  if (!s.ok()) return Status(s.code(), cat("weights file '", path, "': ", s.message()));
  return Status::OK();
}

Status Model::saveWeights(const std::string &path) const {
  std::shared_lock<CallLock> lock(impl_->callMutex);  // no weight change while they are read
  if (!impl_->hasWeights) return invalidArgument("saveWeights: weights are not set (call initWeights or loadWeights first)");
  const Artifact &a = impl_->artifact;
  TensorRefList refs;
  for (size_t i = 0; i < a.params.size(); ++i) refs.emplace_back(a.params[i].name, &impl_->weights[i]);
  std::sort(refs.begin(), refs.end(), [](const auto &x, const auto &y) { return x.first < y.first; });
  try {
    std::vector<uint8_t> bytes;
    TFMRT_RETURN_IF_ERROR(serializeSafetensorsRefs(
        refs, {{"format", "pt"}, {"tfmc_model", a.modelName}, {kWeightsChecksumKey, std::to_string(tensorsCrc(refs))}},
        bytes));
    return writeFileBytes(path, "weights file", bytes.data(), bytes.size());
  } catch (const std::bad_alloc &) {
    return outOfMemory("out of memory while saving weights");
  }
}

bool Model::hasWeights() const {
  std::shared_lock<CallLock> lock(impl_->callMutex);
  return impl_->hasWeights;
}

Status Model::Impl::installWeights(std::vector<Tensor> fresh, bool resetTrainingState) {
  std::lock_guard<CallLock> lock(callMutex);  // no session runs while the weights change
  return installWeightsLocked(std::move(fresh), resetTrainingState);
}

Status Model::Impl::installWeightsLocked(std::vector<Tensor> fresh, bool resetTrainingState) {
  std::swap(weights, fresh);
  const bool had = hasWeights;
  hasWeights = true;
  ++weightsVersion;
  Status s = evaluateWeightDerived();
  if (s.ok()) {
    if (resetTrainingState && session)  // new weights: training state (Adam moments) starts over
      session->internals().zeroStaticStates();
    return s;
  }
  // Leave the model as it was: the previous weights and what was derived from them.
  std::swap(weights, fresh);
  hasWeights = had;
  ++weightsVersion;
  if (had) (void)evaluateWeightDerived();
  return s;
}

void *Model::Impl::knownData(const EntryState &state, uint32_t v) {
  const ValueInfo &info = state.fn->values[v];
  switch (info.kind) {
  case ValueKind::Parameter: return weights.empty() ? nullptr : weights[info.index].rawData();
  case ValueKind::Constant: return constants[info.index].rawData();
  case ValueKind::Intermediate: return state.knownBeforeRun[v] ? const_cast<Tensor &>(state.derived[v]).rawData() : nullptr;
  case ValueKind::Input: return nullptr;
  case ValueKind::State: return nullptr;
  }
  return nullptr;
}

// Runs the weight-derived nodes of every entry in use (in order, so derived values may feed each
// other), then hands each run-time kernel its known operands through prepareWeights.
Status Model::Impl::evaluateWeightDerived() {
  for (EntryState &state : entries)
    if (state.inUse) TFMRT_RETURN_IF_ERROR(evaluateWeightDerived(state));
  return Status::OK();
}

Status Model::Impl::evaluateWeightDerived(EntryState &state) {
  state.inUse = true;
  OmpThreadsScope threads(options.num_threads);
  {
    const EntryFunction &fn = *state.fn;
    auto bind = [&](uint32_t v) {
      void *data = knownData(state, v);
      const Shape *shape = fn.values[v].kind == ValueKind::Intermediate && data ? &state.derived[v].shape : &fn.values[v].shape;
      return TensorRef{fn.values[v].dtype, shape, data};
    };
    auto argsOf = [&](const Node &node) {
      TensorRef *refs = state.refs.data();
      size_t r = 0;
      for (uint32_t v : node.inputs) refs[r++] = bind(v);
      for (uint32_t v : node.outputs) refs[r++] = bind(v);
      KernelArgs args;
      args.inputs = refs;
      args.numInputs = node.inputs.size();
      args.outputs = refs + node.inputs.size();
      args.numOutputs = node.outputs.size();
      args.weightsVersion = weightsVersion;
      return args;
    };
    auto fail = [&](size_t i, const Status &s) {
      return Status(s.code(), cat(entryStr(fn), ": ", nodeStr(i, fn.nodes[i]), " [", state.kernels[i]->name(),
                                  "] (evaluated when weights are set): ", s.message()));
    };
    for (size_t i : state.weightNodes) {
      const auto start = std::chrono::steady_clock::now();
      Status s = state.kernels[i]->run(argsOf(fn.nodes[i]));
      if (options.profile) {
        KernelProfile &entry = profile[{fn.name, cat(state.kernels[i]->name(), " (weights)")}];
        entry.calls += 1;
        entry.millis += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      }
      if (!s.ok()) return fail(i, s);
    }
    for (size_t i : state.runNodes) {
      Status s = state.kernels[i]->prepareWeights(argsOf(fn.nodes[i]));
      if (!s.ok()) return fail(i, s);
    }
  }
  state.preparedVersion = weightsVersion;
  return Status::OK();
}

const Tensor *Model::weight(const std::string &name) const {
  std::shared_lock<CallLock> lock(impl_->callMutex);
  int64_t i = impl_->artifact.findParam(name);
  return (i < 0 || !impl_->hasWeights) ? nullptr : &impl_->weights[size_t(i)];
}

}  // namespace tfmrt
