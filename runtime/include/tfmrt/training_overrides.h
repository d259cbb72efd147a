// Training settings a run may change without recompiling (tfmc train --lr, --lr-scale,
// --warmup-steps, --clip-norm, --weight-decay, --adam-betas, --adam-eps, --label-smoothing,
// --dropout, --attention-dropout, --activation-dropout; fairseq's options of those names). The
// compiled program carries them as attributes of its ops (tfm.lr_schedule, tfm.clip_scale,
// tfm.adam_update, the label-smoothed loss and its gradient, each tfm.dropout by its site);
// applyTrainingOverrides rewrites those and the metadata that records them, so checkpoints
// record, and resumes compare, the values the run trained with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tfmrt/artifact.h"
#include "tfmrt/status.h"

namespace tfmrt {

struct TrainingOverrides {
  std::optional<double> lrScale;      // the schedule's lr_scale
  std::optional<double> peakLr;       // or the rate at the end of warm-up (sets lr_scale)
  std::optional<int64_t> warmupSteps;
  std::optional<double> clipNorm;     // > 0; the artifact must have been compiled with clipping
  std::optional<double> weightDecay;  // in [0, 1)
  std::optional<double> adamBeta1, adamBeta2;  // in [0, 1)
  std::optional<double> adamEps;               // in [1e-30, 1e30]
  std::optional<double> labelSmoothing;        // in [0, 1): the training loss and the validation loss
  // In [0, 1): the rates of the dropout sites the artifact was compiled with (a spec rate of 0
  // builds no site): residual branches and embeddings, attention probabilities, inside the FFN.
  std::optional<double> dropout, attentionDropout, activationDropout;
  bool empty() const;  // none is set
};

// The metadata keys the overrides set ("schedule.lr_scale", ...), each with the option that sets
// it as messages name it ("--lr or --lr-scale") and whether `o` sets it: one table for the
// rewrite, for checkpoints, and for the resume refusal's advice.
struct SettableTrainingKey {
  const char *metadataKey;
  const char *option;
  bool (*isSet)(const TrainingOverrides &o);
};
const std::vector<SettableTrainingKey> &settableTrainingKeys();

// Whether the training options can make `artifact` hold `value` for `metadataKey` (one of
// settableTrainingKeys()): not clipping on or off, nor a dropout rate > 0 of a kind compiled at 0.
bool trainingOptionsCanSet(const Artifact &artifact, const std::string &metadataKey, double value);

// Applies `o` to every function of `artifact` that updates weights (train_step, apply_update).
// Refuses values out of range, lrScale together with peakLr, an artifact without an update,
// clipNorm on one compiled without clipping (clipping adds ops; it is not an attribute), and a
// dropout rate > 0 for a kind of site the artifact has none of (rate 0 at compile time; 0 is
// accepted there, as what the artifact does). The
// errors name the option (--lr, ...). On error `artifact` is unchanged.
Status applyTrainingOverrides(Artifact &artifact, const TrainingOverrides &o);

}  // namespace tfmrt
