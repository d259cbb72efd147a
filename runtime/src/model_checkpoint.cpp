// Training checkpoints: Model::saveCheckpoint / loadCheckpoint.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>

#include "crc32.h"
#include "file_io.h"
#include "format.h"
#include "model_impl.h"
#include "safetensors.h"

namespace tfmrt {
namespace {

constexpr const char *kFormat = kCheckpointFormat;
constexpr const char *kVersion = "1";

// One tensor as the checksum sees it: in memory, or still in the file (TensorInFile).
struct CrcItem {
  const std::string *name;
  DType dtype;
  const std::vector<int64_t> *shape;
  const uint8_t *data;
  size_t bytes;
};

CrcItem crcItem(const std::string &name, const Tensor &t) {
  return {&name, t.dtype, &t.shape, static_cast<const uint8_t *>(t.rawData()), t.nbytes()};
}

// CRC-32 over name, dtype, shape and bytes of every tensor, in name order: independent of the
// file layout, so any changed value, name or shape is caught.
uint32_t tensorsCrc(std::vector<CrcItem> items) {
  std::sort(items.begin(), items.end(), [](const CrcItem &x, const CrcItem &y) { return *x.name < *y.name; });
  uint32_t crc = 0;
  for (const CrcItem &t : items) {
    crc = crc32(reinterpret_cast<const uint8_t *>(t.name->data()), t.name->size(), crc);
    const uint8_t dtype = uint8_t(t.dtype);
    crc = crc32(&dtype, 1, crc);
    crc = crc32(reinterpret_cast<const uint8_t *>(t.shape->data()), t.shape->size() * sizeof(int64_t), crc);
    crc = crc32(t.data, t.bytes, crc);
  }
  return crc;
}

// What must match for a checkpoint's weights to mean the same in this model: parameter names and
// shapes, and the model. metadata (architecture, vocabulary, special ids). Shapes alone would
// accept e.g. relu weights into a gelu model. How the run trains (training., schedule., train.)
// is compared only when resuming (trainingSettingsChange). Checkpoints written before that split
// carry the `legacy` fingerprint, which also covered the training. keys: both are accepted.
std::string modelFingerprint(const Artifact &a, bool legacy = false) {
  uint32_t crc = 0;
  auto add = [&](const std::string &text) {
    crc = crc32(reinterpret_cast<const uint8_t *>(text.data()), text.size() + 1, crc);  // with the NUL
  };
  for (const ParamInfo &p : a.params) {
    add(p.name);
    crc = crc32(reinterpret_cast<const uint8_t *>(p.shape.data()), p.shape.size() * sizeof(int64_t), crc);
  }
  for (const auto &[key, value] : a.metadata)
    if (key.rfind("model.", 0) == 0 || (legacy && key.rfind("training.", 0) == 0)) add(key + "=" + value);
  return std::to_string(crc);
}

// How a run trains (training., schedule. and train. keys: label smoothing, seed, batch size,
// schedule, dropout, Adam), one "key=value" per line; max_steps, which only says where a run
// stops, is left out (a run is continued to a new length).
bool isTrainingSetting(const std::string &key) {
  return (key.rfind("training.", 0) == 0 && key != "training.max_steps") || key.rfind("schedule.", 0) == 0 ||
         key.rfind("train.", 0) == 0;
}

std::string trainingSettings(const Artifact &a) {
  std::string out;
  for (const auto &[key, value] : a.metadata)
    if (isTrainingSetting(key)) out += key + "=" + value + "\n";
  return out;
}

}  // namespace

std::vector<TrainingSettingChange> trainingSettingChanges(const std::map<std::string, std::string> &checkpointMeta,
                                                          const Artifact &a) {
  auto recordedIt = checkpointMeta.find("training_settings");
  if (recordedIt == checkpointMeta.end()) return {};  // written before they were recorded
  const std::string &recorded = recordedIt->second;
  std::map<std::string, std::string> was;
  size_t pos = 0;
  while (pos < recorded.size()) {
    size_t end = recorded.find('\n', pos);
    if (end == std::string::npos) end = recorded.size();
    const std::string line = recorded.substr(pos, end - pos);
    pos = end + 1;
    const size_t eq = line.find('=');
    if (eq != std::string::npos) was[line.substr(0, eq)] = line.substr(eq + 1);
  }
  std::map<std::string, std::string> now;
  for (const auto &[key, value] : a.metadata)
    if (isTrainingSetting(key)) now[key] = value;
  // Settings added later whose absence means "off": a file without one trained (or trains) with 0,
  // so a checkpoint from before clipping and weight decay is refused by an artifact that has them.
  for (const char *key : {"train.clip_norm", "train.weight_decay"})
    for (auto *side : {&was, &now}) side->emplace(key, "0.000000e+00");
  std::vector<TrainingSettingChange> changes;
  for (const auto &[key, value] : was) {
    auto it = now.find(key);  // other keys only one side records (older files) cannot be compared
    if (it != now.end() && it->second != value) changes.push_back({key, value, it->second});
  }
  return changes;
}

std::string describeTrainingSettingChanges(const std::vector<TrainingSettingChange> &changes) {
  std::string text;
  for (const TrainingSettingChange &c : changes)
    text += cat(text.empty() ? "" : ", ", c.key.substr(c.key.find('.') + 1), " ", c.checkpointValue, " -> ", c.artifactValue);
  return text;
}

std::string trainingSettingsChange(const std::map<std::string, std::string> &checkpointMeta, const Artifact &a) {
  return describeTrainingSettingChanges(trainingSettingChanges(checkpointMeta, a));
}

namespace {

// The checksum also covers the step and the fingerprint: an edited header is caught too.
// (and the training settings; absent in older files, where they add nothing).
std::string checksum(uint32_t crc, const std::string &step, const std::string &fingerprint, const std::string &settings) {
  crc = crc32(reinterpret_cast<const uint8_t *>(step.data()), step.size(), crc);
  crc = crc32(reinterpret_cast<const uint8_t *>(fingerprint.data()), fingerprint.size(), crc);
  crc = crc32(reinterpret_cast<const uint8_t *>(settings.data()), settings.size(), crc);
  return std::to_string(crc);
}

std::string metadataField(const MetadataMap &metadata, const char *key) {
  auto it = metadata.find(key);
  return it == metadata.end() ? std::string() : it->second;
}

std::vector<CrcItem> crcItems(const TensorMap &tensors, const std::map<std::string, TensorInFile> &inFile) {
  std::vector<CrcItem> items;
  for (const auto &[name, t] : tensors) items.push_back(crcItem(name, t));
  for (const auto &[name, t] : inFile) items.push_back({&name, t.dtype, &t.shape, t.data, t.bytes});
  return items;
}

// The checks every reader of a tfmc checkpoint makes (loadCheckpoint, inspect): the version it
// was written in, and the checksum over its tensors, step, fingerprint and settings.
Status checkVersionAndChecksum(const std::string &path, const MetadataMap &metadata, std::vector<CrcItem> items) {
  auto field = [&](const char *key) { return metadataField(metadata, key); };
  if (field("version") != kVersion)
    return invalidArgument(cat("checkpoint '", path, "': version '", field("version"),
                               "' is not supported (this tfmc reads version ", kVersion, ")"));
  if (field("crc32") != checksum(tensorsCrc(std::move(items)), field("step"), field("model_fingerprint"), field("training_settings")))
    return dataLoss(cat("checkpoint '", path, "': checksum mismatch: the file is corrupt"));
  return Status::OK();
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

uint32_t tensorsCrc(const TensorRefList &refs) {
  std::vector<CrcItem> items;
  for (const auto &[name, t] : refs) items.push_back(crcItem(name, *t));
  return tensorsCrc(std::move(items));
}

uint32_t tensorsCrc(const TensorMap &tensors) {
  std::vector<CrcItem> items;
  for (const auto &[name, t] : tensors) items.push_back(crcItem(name, t));
  return tensorsCrc(std::move(items));
}

Status Model::saveCheckpoint(const std::string &path, int64_t step, const std::map<std::string, std::string> &meta) const {
  // Alone: no training step may change what is being checksummed and written, and the default
  // session's training state may be allocated here.
  std::lock_guard<CallLock> lock(impl_->callMutex);
  if (!impl_->hasWeights) return invalidArgument("saveCheckpoint: weights are not set");
  if (step < 0) return invalidArgument(cat("saveCheckpoint: the step must be >= 0, got ", step));  // loadCheckpoint refuses it
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
    metadata["training_settings"] = trainingSettings(a);
    metadata["crc32"] =
        checksum(tensorsCrc(refs), metadata["step"], metadata["model_fingerprint"], metadata["training_settings"]);
    std::vector<uint8_t> bytes;
    TFMRT_RETURN_IF_ERROR(serializeSafetensorsRefs(refs, metadata, bytes));
    return writeFileBytes(path, "checkpoint", bytes.data(), bytes.size());
  } catch (const std::bad_alloc &) {
    return outOfMemory("out of memory while saving a checkpoint");
  }
}

Status readCheckpointFile(const std::string &path, CheckpointSummary &summary) {
  try {
    // Nothing copied: the tensors are checksummed where the mapped file holds them (a
    // transformer-big checkpoint with its Adam moments is a few GB).
    FileView file;
    TFMRT_RETURN_IF_ERROR(file.open(path, "safetensors file"));
    TensorMap tensors;  // I64 tensors only (converted on reading)
    std::map<std::string, TensorInFile> inFile;
    MetadataMap metadata;
    summary = CheckpointSummary();
    TFMRT_RETURN_IF_ERROR(parseSafetensorsSelected(
        file.data(), file.size(), [](const std::string &) { return false; }, tensors, inFile, &metadata, path));
    summary.isSafetensors = true;
    summary.metadata.insert(metadata.begin(), metadata.end());
    for (const auto &[name, t] : tensors) summary.shapes[name] = t.shape;
    for (const auto &[name, t] : inFile) summary.shapes[name] = t.shape;
    summary.isCheckpoint = metadataField(metadata, "format") == kFormat;
    if (summary.isCheckpoint) {
      TFMRT_RETURN_IF_ERROR(checkVersionAndChecksum(path, metadata, crcItems(tensors, inFile)));
    } else if (metadata.count(kWeightsChecksumKey)) {  // weights tfmc wrote (others carry none)
      if (metadata.at(kWeightsChecksumKey) != std::to_string(tensorsCrc(crcItems(tensors, inFile))))
        return dataLoss(cat("weights file '", path, "': checksum mismatch: the file is corrupt"));
    } else {
      return Status::OK();
    }
    summary.checksumVerified = true;
    return Status::OK();
  } catch (const std::bad_alloc &) {
    return outOfMemory(cat("out of memory while reading '", path, "'"));
  }
}

Status Model::loadCheckpoint(const std::string &path, int64_t &step, std::map<std::string, std::string> *meta,
                             bool withTrainingState) {
  try {
    // Without the training state only the weights are copied out of the mapped file; the
    // optimizer moments (two thirds of a checkpoint) are checked and checksummed in place.
    FileView file;
    TFMRT_RETURN_IF_ERROR(file.open(path, "safetensors file"));
    TensorMap tensors;
    std::map<std::string, TensorInFile> inFile;
    MetadataMap metadata;
    const Artifact &artifact = impl_->artifact;
    TFMRT_RETURN_IF_ERROR(parseSafetensorsSelected(
        file.data(), file.size(), [&](const std::string &name) { return withTrainingState || artifact.findParam(name) >= 0; },
        tensors, inFile, &metadata, path));
    auto field = [&](const char *key) {
      auto it = metadata.find(key);
      return it == metadata.end() ? std::string() : it->second;
    };
    auto refuse = [&](const std::string &why) { return invalidArgument(cat("checkpoint '", path, "': ", why)); };
    if (field("format") != kFormat)
      return refuse(cat("not a tfmc checkpoint (format '", field("format"), "', expected '", kFormat, "')"));
    TFMRT_RETURN_IF_ERROR(checkVersionAndChecksum(path, metadata, crcItems(tensors, inFile)));
    if (field("tfmc_model") != impl_->artifact.modelName)
      return refuse(cat("was saved from model '", field("tfmc_model"), "', this is '", impl_->artifact.modelName, "'"));
    if (field("model_fingerprint") != modelFingerprint(artifact) &&
        field("model_fingerprint") != modelFingerprint(artifact, /*legacy=*/true)) {
      // Name the first parameter that differs, where one does (the fingerprint is only a CRC).
      std::string which;
      for (const ParamInfo &p : artifact.params) {
        auto it = tensors.find(p.name);
        if (it == tensors.end()) which = cat("; it has no parameter '", p.name, "'");
        else if (it->second.shape != p.shape)
          which = cat("; parameter '", p.name, "' is ", shapeStr(it->second.shape), " there, ", shapeStr(p.shape), " here");
        if (!which.empty()) break;
      }
      return refuse(cat("was saved from a model '", field("tfmc_model"),
                        "' with other parameters or hyper-parameters (the model: settings of the spec)", which));
    }
    char *end = nullptr;
    const std::string stepText = field("step");
    errno = 0;
    const long long parsed = std::strtoll(stepText.c_str(), &end, 10);
    if (stepText.empty() || *end || errno == ERANGE || parsed < 0 || parsed >= INT32_MAX)
      return refuse(cat("bad step '", stepText, "'"));

    // Weights and state go in together: take both apart first, so an error changes nothing.
    // (Tensors left in the file are never weights: every parameter name was copied out.)
    std::map<std::string, Tensor> weights, state;
    for (auto &[name, t] : tensors) (artifact.findParam(name) >= 0 ? weights : state)[name] = std::move(t);
    std::map<std::string, std::pair<DType, const std::vector<int64_t> *>> stateKinds;  // all of the file's
    for (const auto &[name, t] : state) stateKinds[name] = {t.dtype, &t.shape};
    for (const auto &[name, t] : inFile) stateKinds[name] = {t.dtype, &t.shape};
    // This model's training state, by name. A model without any (compiled without train_step:
    // translation, evaluation) takes the weights only.
    std::vector<const StateInfo *> expected;
    for (const StateInfo &st : artifact.states)
      if (isCheckpointedState(st)) expected.push_back(&st);
    // Weights only (no train_step here, or not wanted): the file's training state, if any, is
    // covered by the checksum above and otherwise not needed (an averaged weights-only file loads).
    if (expected.empty() || !withTrainingState) {
      expected.clear();
      state.clear();
      stateKinds.clear();
    }
    if (expected.size() != stateKinds.size())
      return refuse(cat("holds ", stateKinds.size(), " optimizer state tensors, this model has ", expected.size(),
                        stateKinds.empty() ? " (a weights-only file: start a new run from it with --weights)" : ""));
    for (const StateInfo *st : expected) {
      auto it = stateKinds.find(st->name);
      if (it == stateKinds.end()) return refuse(cat("missing optimizer state '", st->name, "'"));
      if (it->second.first != st->dtype || *it->second.second != st->shape)
        return refuse(cat("optimizer state '", st->name, "' is ", dtypeName(it->second.first), shapeStr(*it->second.second),
                          ", expected ", dtypeName(st->dtype), shapeStr(st->shape)));
    }
    std::vector<Tensor> fresh;
    if (Status s = impl_->weightsInOrder(std::move(weights), fresh); !s.ok()) return refuse(s.message());
    // Weights and training state change in one step: no call runs in between (a training step
    // there would pair the new weights with the old moments).
    std::lock_guard<CallLock> lock(impl_->callMutex);
    // The default session's training state tensors (allocated here); without withTrainingState
    // the file's are checked, not kept, and training state starts over with the weights.
    TensorRefList current;
    if (withTrainingState) trainingState(*impl_, current);
    Status s = impl_->installWeightsLocked(std::move(fresh), /*resetTrainingState=*/!withTrainingState);
    if (!s.ok()) return refuse(s.message());
    for (const auto &[name, t] : current)  // checked above: nothing can fail from here
      std::memcpy(const_cast<Tensor *>(t)->rawData(), state.at(name).rawData(), t->nbytes());
    step = parsed;
    if (meta) *meta = std::map<std::string, std::string>(metadata.begin(), metadata.end());
    return Status::OK();
  } catch (const std::bad_alloc &) {
    return outOfMemory("out of memory while loading a checkpoint");
  }
}

}  // namespace tfmrt
