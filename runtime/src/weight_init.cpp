#include "weight_init.h"

#include <cmath>

#include "format.h"

namespace tfmrt {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

float uniformAt(uint64_t key, uint64_t counter) {
  return float(splitmix64(key ^ splitmix64(counter)) >> 40) * (1.0f / 16777216.0f);
}

uint64_t paramKey(uint64_t seed, const std::string &name) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  return splitmix64(seed ^ splitmix64(h));
}

Status initParam(const ParamInfo &p, uint64_t seed, Tensor &out) {
  out = Tensor(p.dtype, p.shape);
  const int64_t n = out.numel();
  if (p.init == ParamInit::Zeros) return Status::OK();  // Tensor storage starts zeroed
  if (p.dtype != DType::F32)
    return invalidArgument(cat("parameter '", p.name, "': only f32 parameters can use a random or ones init, got ",
                               dtypeName(p.dtype)));
  float *w = out.data<float>();
  const uint64_t key = paramKey(seed, p.name);
  switch (p.init) {
  case ParamInit::Zeros: break;
  case ParamInit::Ones:
    for (int64_t i = 0; i < n; ++i) w[i] = 1.0f;
    break;
  case ParamInit::XavierUniform: {
    if (p.shape.size() < 2)
      return invalidArgument(cat("parameter '", p.name, "': Xavier init needs at least 2 dims, got ", shapeStr(p.shape)));
    int64_t receptive = 1;
    for (size_t i = 2; i < p.shape.size(); ++i) receptive *= p.shape[i];
    const double fanIn = double(p.shape[1] * receptive), fanOut = double(p.shape[0] * receptive);
    const float bound = fanIn + fanOut > 0 ? float(std::sqrt(6.0 / (fanIn + fanOut))) : 0.0f;
#pragma omp parallel for if (n >= (1 << 16))
    for (int64_t i = 0; i < n; ++i) w[i] = bound * (2.0f * uniformAt(key, uint64_t(i)) - 1.0f);
    break;
  }
  case ParamInit::Normal: {
    // Box-Muller on two independent counters per element.
#pragma omp parallel for if (n >= (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
      const double u1 = 1.0 - double(uniformAt(key, 2 * uint64_t(i)));  // (0, 1]
      const double u2 = double(uniformAt(key, 2 * uint64_t(i) + 1));
      w[i] = float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    }
    break;
  }
  }
  return Status::OK();
}

}  // namespace tfmrt
