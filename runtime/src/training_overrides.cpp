#include "tfmrt/training_overrides.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "format.h"
#include "tfmrt/model_info.h"

namespace tfmrt {

namespace {

// The spec's bounds for the same fields (compiler/spec/ModelSpec.cpp): what the f32 kernels take.
constexpr double kMaxRate = 1e30;

Status outOfRange(const char *option, const std::string &want, double got) {
  return invalidArgument(cat(option, " must be ", want, ", got ", got));
}

// The kinds of dropout site, told apart by the site names the importer gives
// ("<scope>.probs", "<scope>.activation"; "<scope>.residual" and "<branch>.embed" are `dropout`).
// A site of another name (an artifact built by hand) is no option's to change.
enum DropoutKind { kResidualDropout, kAttentionDropout, kActivationDropout, kDropoutKinds, kOtherDropout = kDropoutKinds };

bool endsWith(const std::string &s, const char *suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

DropoutKind dropoutKind(const Node &node) {
  const auto it = node.attrs.find("site");
  const std::string site = it == node.attrs.end() ? "" : it->second.s;
  if (endsWith(site, ".probs")) return kAttentionDropout;
  if (endsWith(site, ".activation")) return kActivationDropout;
  if (endsWith(site, ".residual") || endsWith(site, ".embed")) return kResidualDropout;
  return kOtherDropout;
}

// Each dropout option: its kind of site, the metadata key that records it, and the spec key that
// compiles it in.
struct DropoutSetting {
  std::optional<double> TrainingOverrides::*rate;
  DropoutKind kind;
  const char *metadataKey, *option, *specKey;
};
constexpr DropoutSetting kDropoutSettings[] = {
    {&TrainingOverrides::dropout, kResidualDropout, "train.dropout", "--dropout", "model.dropout"},
    {&TrainingOverrides::attentionDropout, kAttentionDropout, "train.attention_dropout", "--attention-dropout",
     "model.attention_dropout"},
    {&TrainingOverrides::activationDropout, kActivationDropout, "train.activation_dropout", "--activation-dropout",
     "model.activation_dropout"},
};

// The ops the overrides rewrite, counted over the artifact's functions.
struct OverridableOps {
  int schedules = 0, clips = 0, updates = 0, dropouts[kDropoutKinds] = {};
};
OverridableOps countOverridableOps(const Artifact &artifact) {
  OverridableOps n;
  for (const EntryFunction &fn : artifact.functions)
    for (const Node &node : fn.nodes) {
      n.schedules += node.op == "tfm.lr_schedule";
      n.clips += node.op == "tfm.clip_scale";
      n.updates += node.op == "tfm.adam_update";
      if (node.op == "tfm.dropout")
        if (const DropoutKind kind = dropoutKind(node); kind != kOtherDropout) ++n.dropouts[kind];
    }
  return n;
}

}  // namespace

const std::vector<SettableTrainingKey> &settableTrainingKeys() {
  using O = const TrainingOverrides &;
  static const std::vector<SettableTrainingKey> keys = {
      {"schedule.lr_scale", "--lr or --lr-scale", [](O o) { return o.lrScale || o.peakLr; }},
      {"schedule.warmup_steps", "--warmup-steps", [](O o) { return bool(o.warmupSteps); }},
      {"train.clip_norm", "--clip-norm", [](O o) { return bool(o.clipNorm); }},
      {"train.weight_decay", "--weight-decay", [](O o) { return bool(o.weightDecay); }},
      {"train.adam_beta1", "--adam-betas", [](O o) { return bool(o.adamBeta1); }},
      {"train.adam_beta2", "--adam-betas", [](O o) { return bool(o.adamBeta2); }},
      {"train.adam_eps", "--adam-eps", [](O o) { return bool(o.adamEps); }},
      {"training.label_smoothing", "--label-smoothing", [](O o) { return bool(o.labelSmoothing); }},
      {"train.dropout", "--dropout", [](O o) { return bool(o.dropout); }},
      {"train.attention_dropout", "--attention-dropout", [](O o) { return bool(o.attentionDropout); }},
      {"train.activation_dropout", "--activation-dropout", [](O o) { return bool(o.activationDropout); }},
  };
  return keys;
}

bool TrainingOverrides::empty() const {
  for (const SettableTrainingKey &key : settableTrainingKeys())
    if (key.isSet(*this)) return false;
  return true;
}

bool trainingOptionsCanSet(const Artifact &artifact, const std::string &metadataKey, double value) {
  bool known = false;
  for (const SettableTrainingKey &key : settableTrainingKeys()) known |= metadataKey == key.metadataKey;
  if (!known) return false;
  const OverridableOps ops = countOverridableOps(artifact);
  if (metadataKey == "train.clip_norm") return ops.clips > 0 && value > 0;  // a norm, not clipping on or off
  for (const DropoutSetting &d : kDropoutSettings)
    if (metadataKey == d.metadataKey) return value == 0 || ops.dropouts[d.kind] > 0;
  return true;
}

Status applyTrainingOverrides(Artifact &artifact, const TrainingOverrides &o) {
  if (o.empty()) return Status::OK();
  if (o.lrScale && o.peakLr)
    return invalidArgument("--lr (the peak rate) and --lr-scale both set the schedule's scale: give one");
  if (o.lrScale && !(*o.lrScale > 0 && *o.lrScale <= kMaxRate)) return outOfRange("--lr-scale", "in (0, 1e30]", *o.lrScale);
  if (o.peakLr && !(*o.peakLr > 0 && *o.peakLr <= kMaxRate)) return outOfRange("--lr", "in (0, 1e30]", *o.peakLr);
  if (o.warmupSteps && (*o.warmupSteps < 1 || *o.warmupSteps > std::numeric_limits<int32_t>::max()))
    return outOfRange("--warmup-steps", "in [1, 2147483647]", double(*o.warmupSteps));
  if (o.clipNorm && !(*o.clipNorm > 0 && *o.clipNorm <= kMaxRate)) return outOfRange("--clip-norm", "in (0, 1e30]", *o.clipNorm);
  if (o.weightDecay && !(*o.weightDecay >= 0 && *o.weightDecay < 1))
    return outOfRange("--weight-decay", "in [0, 1)", *o.weightDecay);
  for (const auto &[value, option] : {std::pair{o.adamBeta1, "--adam-betas (beta1)"}, {o.adamBeta2, "--adam-betas (beta2)"},
                                     {o.labelSmoothing, "--label-smoothing"}, {o.dropout, "--dropout"},
                                     {o.attentionDropout, "--attention-dropout"},
                                     {o.activationDropout, "--activation-dropout"}})
    if (value && !(*value >= 0 && *value < 1)) return outOfRange(option, "in [0, 1)", *value);
  // Adam runs in f32: a smaller eps is 0 there (0/0), a larger one inf (as the spec's bounds).
  if (o.adamEps && !(*o.adamEps >= 1e-30 && *o.adamEps <= kMaxRate)) return outOfRange("--adam-eps", "in [1e-30, 1e30]", *o.adamEps);

  ModelInfo info;
  TFMRT_RETURN_IF_ERROR(readModelInfo(artifact, info));
  const OverridableOps ops = countOverridableOps(artifact);
  if (ops.schedules == 0 || ops.updates == 0)
    return invalidArgument(cat("model '", artifact.modelName,
                               "' updates no weights (no train_step or apply_update entry): the training options "
                               "(--lr, --warmup-steps, ...) have nothing to change"));
  if (o.clipNorm && ops.clips == 0)
    return invalidArgument(cat("--clip-norm: model '", artifact.modelName,
                               "' was compiled without gradient clipping, which adds ops to the update (it is not a "
                               "value to set): set training.clip_norm in its spec and recompile; --clip-norm then "
                               "changes the norm"));
  // A rate of 0 at compile time builds no dropout site (nothing to draw masks for), so there is
  // no rate to change: as clipping, it is the spec's to switch on. Asking for 0 there is what the
  // artifact does already.
  for (const DropoutSetting &d : kDropoutSettings)
    if (const auto &rate = o.*d.rate; rate && *rate > 0 && ops.dropouts[d.kind] == 0)
      return invalidArgument(cat(d.option, ": model '", artifact.modelName, "' was compiled with ", d.specKey,
                                 " 0, which builds no such dropout (there is no rate to change): set ", d.specKey,
                                 " > 0 in its spec and recompile; ", d.option, " then changes the rate (0 included)"));

  // The new values, then the attributes that carry them: nothing changes until all are known.
  Artifact updated = artifact;
  for (EntryFunction &fn : updated.functions)
    for (Node &node : fn.nodes) {
      if (node.op == "tfm.lr_schedule") {
        const int64_t dModel = node.attrs.count("d_model") ? node.attrs.at("d_model").i : info.dModel;
        const int64_t warmup = o.warmupSteps ? *o.warmupSteps : node.attrs.count("warmup_steps") ? node.attrs.at("warmup_steps").i : info.warmupSteps;
        if (o.warmupSteps) node.attrs["warmup_steps"] = AttrValue::ofInt(warmup);
        if (o.lrScale) node.attrs["lr_scale"] = AttrValue::ofFloat(*o.lrScale);
        if (o.peakLr) {
          const double scale = lrScaleForPeak(*o.peakLr, dModel, warmup);
          if (!(scale <= kMaxRate))
            return invalidArgument(cat("--lr ", *o.peakLr, " needs lr_scale ", scale, " (lr * sqrt(d_model * warmup_steps)), past 1e30"));
          node.attrs["lr_scale"] = AttrValue::ofFloat(scale);
        }
        info.warmupSteps = warmup;
        info.lrScale = node.attrs.count("lr_scale") ? node.attrs.at("lr_scale").f : info.lrScale;
      } else if (node.op == "tfm.clip_scale" && o.clipNorm) {
        node.attrs["max_norm"] = AttrValue::ofFloat(*o.clipNorm);
      } else if (node.op == "tfm.adam_update") {
        if (o.weightDecay) node.attrs["weight_decay"] = AttrValue::ofFloat(*o.weightDecay);
        if (o.adamBeta1) node.attrs["beta1"] = AttrValue::ofFloat(*o.adamBeta1);
        if (o.adamBeta2) node.attrs["beta2"] = AttrValue::ofFloat(*o.adamBeta2);
        if (o.adamEps) node.attrs["epsilon"] = AttrValue::ofFloat(*o.adamEps);
      } else if (node.attrs.count("smoothing") && o.labelSmoothing) {  // the loss, its gradient (fused or not)
        node.attrs["smoothing"] = AttrValue::ofFloat(*o.labelSmoothing);
      } else if (node.op == "tfm.dropout") {  // forward and backward alike (one site, one mask)
        for (const DropoutSetting &d : kDropoutSettings)
          if (const auto &rate = o.*d.rate; rate && d.kind == dropoutKind(node)) node.attrs["rate"] = AttrValue::ofFloat(*rate);
      }
    }
  if (o.clipNorm) info.clipNorm = *o.clipNorm;
  if (o.weightDecay) info.weightDecay = *o.weightDecay;
  if (o.adamBeta1) info.adamBeta1 = *o.adamBeta1;
  if (o.adamBeta2) info.adamBeta2 = *o.adamBeta2;
  if (o.adamEps) info.adamEps = *o.adamEps;
  if (o.labelSmoothing) info.labelSmoothing = *o.labelSmoothing;
  if (o.dropout) info.dropout = *o.dropout;
  if (o.attentionDropout) info.attentionDropout = *o.attentionDropout;
  if (o.activationDropout) info.activationDropout = *o.activationDropout;
  // Only the keys of what was set: an artifact without one (older, or built by hand) gains no
  // default that its ops may not hold.
  const auto recorded = toMetadata(info);
  for (const SettableTrainingKey &key : settableTrainingKeys())
    if (key.isSet(o)) updated.metadata[key.metadataKey] = recorded.at(key.metadataKey);
  artifact = std::move(updated);
  return Status::OK();
}

}  // namespace tfmrt
