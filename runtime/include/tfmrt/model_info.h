// The model facts an artifact carries for the tools (vocabulary, special ids, decoding and
// training defaults), typed. The compiler fills a ModelInfo from the spec and stores it as the
// artifact's metadata (toMetadata); tools read it back once (readModelInfo), every key checked.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "tfmrt/artifact.h"
#include "tfmrt/status.h"

namespace tfmrt {

struct ModelInfo {
  std::string specPath;
  // model
  int64_t dModel = 0, heads = 0, dFF = 0, encoderLayers = 0, decoderLayers = 0;
  int64_t srcVocabSize = 8, tgtVocabSize = 8, maxLen = 128;
  int64_t padId = 0, bosId = 1, eosId = 2;
  std::string positions = "sinusoidal", norm = "post", activation = "relu";
  // training
  double labelSmoothing = 0.1;
  int64_t batchTokens = 4096, maxSteps = 0, seed = 1;
  // The learning-rate schedule (for logs; the compiled train_step computes the rate itself).
  // Recorded under "schedule." (not fingerprinted by checkpoints, so older artifacts, which lack
  // it, keep their checkpoints); scheduleKnown says whether the artifact has it.
  double lrScale = 1.0;
  int64_t warmupSteps = 4000;
  bool scheduleKnown = false;
  // Dropout and Adam (for checkpoints: resuming with other values would not continue the run).
  // Recorded under "train." (not fingerprinted either: weights stay loadable for translation).
  double dropout = 0.1, attentionDropout = 0, activationDropout = 0;
  double adamBeta1 = 0.9, adamBeta2 = 0.98, adamEps = 1e-9;
  double clipNorm = 0;     // gradient clipping by the global norm (0: off)
  double weightDecay = 0;  // decoupled weight decay (0: none)
  // decoding
  int64_t beamSize = 4;
  double lengthPenalty = 0.6, maxLengthRatio = 1.5;
  int64_t maxLengthOffset = 10;
  // the shapes `compile:` plans memory for (and tfmc run's sample batch)
  int64_t compileBatch = 8, compileSrcLen = 16, compileTgtLen = 16;
};

// The paper's schedule (eq. 3): lr(step) = lr_scale * d_model^-0.5 * min(step^-0.5, step *
// warmup^-1.5), the one tfm.lr_schedule computes. It peaks at step = warmup at
// lr_scale / sqrt(d_model * warmup); a peak rate (fairseq's --lr with its inverse_sqrt schedule,
// Marian's --learn-rate with --lr-warmup and --lr-decay-inv-sqrt) is the lr_scale below.
inline double scheduledLearningRate(double lrScale, double dModel, double warmupSteps, double step) {
  return lrScale / std::sqrt(dModel) * std::min(1.0 / std::sqrt(step), step * std::pow(warmupSteps, -1.5));
}
inline double lrScaleForPeak(double peakLr, int64_t dModel, int64_t warmupSteps) {
  return peakLr * std::sqrt(double(dModel) * double(warmupSteps));
}

std::map<std::string, std::string> toMetadata(const ModelInfo &info);
// Every known key parsed and range-checked; absent keys keep the defaults above (artifacts built
// by hand carry none). The error names the key and its value.
Status readModelInfo(const Artifact &artifact, ModelInfo &info);

}  // namespace tfmrt
