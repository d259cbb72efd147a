// Deterministic parameter initialisation: a counter-based generator (splitmix64 of
// key + counter), so every element is a pure function of (seed, parameter name, element index),
// independent of thread count, parameter order and of the other parameters.
#pragma once

#include <cstdint>

#include "tfmrt/artifact.h"
#include "tfmrt/status.h"
#include "tfmrt/tensor.h"

namespace tfmrt {

uint64_t splitmix64(uint64_t x);
// Uniform in [0, 1) with 24 random bits (exactly representable in f32).
float uniformAt(uint64_t key, uint64_t counter);
// The stream key of one parameter.
uint64_t paramKey(uint64_t seed, const std::string &name);

// Fills `out` (allocated to the parameter's dtype/shape) per param.init.
Status initParam(const ParamInfo &param, uint64_t seed, Tensor &out);

}  // namespace tfmrt
