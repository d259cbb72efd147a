// Training checkpoints: Model::saveCheckpoint / loadCheckpoint.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "crc32.h"
#include "file_io.h"
#include "format.h"
#include "model_impl.h"
#include "safetensors.h"

namespace tfmrt {
namespace {

constexpr const char *kFormat = "tfmc-checkpoint";
constexpr const char *kVersion = "1";

// CRC-32 over name, dtype, shape and bytes of every tensor, in name order: independent of the
// file layout, so any changed value, name or shape is caught.
uint32_t tensorsCrc(const TensorRefList &refs) {
  uint32_t crc = 0;
  for (const auto &[name, t] : refs) {
    crc = crc32(reinterpret_cast<const uint8_t *>(name.data()), name.size(), crc);
    const uint8_t dtype = uint8_t(t->dtype);
    crc = crc32(&dtype, 1, crc);
    crc = crc32(reinterpret_cast<const uint8_t *>(t->shape.data()), t->shape.size() * sizeof(int64_t), crc);
    crc = crc32(static_cast<const uint8_t *>(t->rawData()), t->nbytes(), crc);
  }
  return crc;
}

// What must match for a checkpoint to continue a run: parameter names and shapes, and the
// model and training hyper-parameters the compiler recorded (architecture, dropout, optimizer,
// schedule, seed). Shapes alone would accept e.g. relu weights into a gelu model.
std::string modelFingerprint(const Artifact &a) {
  uint32_t crc = 0;
  auto add = [&](const std::string &text) {
    crc = crc32(reinterpret_cast<const uint8_t *>(text.data()), text.size() + 1, crc);  // with the NUL
  };
  for (const ParamInfo &p : a.params) {
    add(p.name);
    crc = crc32(reinterpret_cast<const uint8_t *>(p.shape.data()), p.shape.size() * sizeof(int64_t), crc);
  }
  for (const auto &[key, value] : a.metadata)
    if (key.rfind("model.", 0) == 0 || key.rfind("training.", 0) == 0) add(key + "=" + value);
  return std::to_string(crc);
}

// The checksum also covers the step and the fingerprint: an edited header is caught too.
std::string checksum(const TensorRefList &refs, const std::string &step, const std::string &fingerprint) {
  uint32_t crc = tensorsCrc(refs);
  crc = crc32(reinterpret_cast<const uint8_t *>(step.data()), step.size(), crc);
  crc = crc32(reinterpret_cast<const uint8_t *>(fingerprint.data()), fingerprint.size(), crc);
  return std::to_string(crc);
}

TensorRefList sortedRefs(const TensorMap &tensors) {
  TensorRefList refs;
  for (const auto &[name, t] : tensors) refs.emplace_back(name, &t);
  return refs;  // std::map: already in name order
}

// The training state: the checkpointed session states of the default session (Adam moments), by
// name, allocated (zeros) if no run has used them yet. Throws std::bad_alloc.
void trainingState(const Model::Impl &m, TensorRefList &out) {
  m.session->internals().allocateStaticStates();
  const auto &states = m.session->internals().states;
  for (size_t i = 0; i < m.artifact.states.size(); ++i)
    if (isCheckpointedState(m.artifact.states[i])) out.emplace_back(m.artifact.states[i].name, &states[i]);
}

}  // namespace

Status Model::saveCheckpoint(const std::string &path, int64_t step, const std::map<std::string, std::string> &meta) const {
  if (!impl_->hasWeights) return invalidArgument("saveCheckpoint: weights are not set");
  try {
    const Artifact &a = impl_->artifact;
    TensorRefList refs;
    for (size_t i = 0; i < a.params.size(); ++i) refs.emplace_back(a.params[i].name, &impl_->weights[i]);
    trainingState(*impl_, refs);
    std::sort(refs.begin(), refs.end(), [](const auto &x, const auto &y) { return x.first < y.first; });
    MetadataMap metadata(meta.begin(), meta.end());
    metadata["format"] = kFormat;
    metadata["version"] = kVersion;
    metadata["tfmc_model"] = a.modelName;
    metadata["step"] = std::to_string(step);
    metadata["model_fingerprint"] = modelFingerprint(a);
    metadata["crc32"] = checksum(refs, metadata["step"], metadata["model_fingerprint"]);
    std::vector<uint8_t> bytes;
    TFMRT_RETURN_IF_ERROR(serializeSafetensorsRefs(refs, metadata, bytes));
    return writeFileBytes(path, "checkpoint", bytes.data(), bytes.size());
  } catch (const std::bad_alloc &) {
    return internalError("out of memory while saving a checkpoint");
  }
}

Status Model::loadCheckpoint(const std::string &path, int64_t &step, std::map<std::string, std::string> *meta,
                             bool withTrainingState) {
  try {
    TensorMap tensors;
    MetadataMap metadata;
    TFMRT_RETURN_IF_ERROR(readSafetensors(path, tensors, &metadata));
    auto field = [&](const char *key) {
      auto it = metadata.find(key);
      return it == metadata.end() ? std::string() : it->second;
    };
    auto refuse = [&](const std::string &why) { return invalidArgument(cat("checkpoint '", path, "': ", why)); };
    if (field("format") != kFormat)
      return refuse(cat("not a tfmc checkpoint (format '", field("format"), "', expected '", kFormat, "')"));
    if (field("version") != kVersion)
      return refuse(cat("version '", field("version"), "' is not supported (this tfmc reads version ", kVersion, ")"));
    if (field("tfmc_model") != impl_->artifact.modelName)
      return refuse(cat("was saved from model '", field("tfmc_model"), "', this is '", impl_->artifact.modelName, "'"));
    if (field("crc32") != checksum(sortedRefs(tensors), field("step"), field("model_fingerprint")))
      return refuse("checksum mismatch: the file is corrupt");
    if (field("model_fingerprint") != modelFingerprint(impl_->artifact))
      return refuse(cat("was saved from a model '", impl_->artifact.modelName,
                        "' with other parameters or hyper-parameters (model./training. settings of the spec)"));
    char *end = nullptr;
    const std::string stepText = field("step");
    errno = 0;
    const long long parsed = std::strtoll(stepText.c_str(), &end, 10);
    if (stepText.empty() || *end || errno == ERANGE || parsed < 0 || parsed >= INT32_MAX)
      return refuse(cat("bad step '", stepText, "'"));

    // Weights and state go in together: take both apart first, so an error changes nothing.
    std::map<std::string, Tensor> weights, state;
    for (auto &[name, t] : tensors) (impl_->artifact.findParam(name) >= 0 ? weights : state)[name] = std::move(t);
    // This model's training state, by name. A model without any (compiled without train_step:
    // translation, evaluation) takes the weights only.
    std::vector<const StateInfo *> expected;
    for (const StateInfo &st : impl_->artifact.states)
      if (isCheckpointedState(st)) expected.push_back(&st);
    if (expected.empty()) state.clear();
    if (expected.size() != state.size())
      return refuse(cat("holds ", state.size(), " optimizer state tensors, this model has ", expected.size()));
    for (const StateInfo *st : expected) {
      auto it = state.find(st->name);
      if (it == state.end()) return refuse(cat("missing optimizer state '", st->name, "'"));
      if (it->second.dtype != st->dtype || it->second.shape != st->shape)
        return refuse(cat("optimizer state '", st->name, "' is ", it->second.describe(), ", expected ",
                          dtypeName(st->dtype), shapeStr(st->shape)));
    }
    // The default session's training state tensors (allocated here); without withTrainingState
    // the file's are checked, not kept, and training state starts over with the weights.
    TensorRefList current;
    if (withTrainingState) trainingState(*impl_, current);
    Status s = setWeights(weights, /*keepTrainingState=*/withTrainingState);
    if (!s.ok()) return refuse(s.message());
    std::lock_guard<std::mutex> lock(impl_->callMutex);  // no session runs while the moments change
    for (const auto &[name, t] : current)  // checked above: nothing can fail from here
      std::memcpy(const_cast<Tensor *>(t)->rawData(), state.at(name).rawData(), t->nbytes());
    step = parsed;
    if (meta) *meta = std::map<std::string, std::string>(metadata.begin(), metadata.end());
    return Status::OK();
  } catch (const std::bad_alloc &) {
    return internalError("out of memory while loading a checkpoint");
  }
}

}  // namespace tfmrt
