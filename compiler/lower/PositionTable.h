#pragma once
#include <cstdint>
#include <vector>

namespace tfmc {
// Sinusoidal table of "Attention Is All You Need": PE[p, 2i] = sin(p / 10000^(2i/D)),
// PE[p, 2i+1] = cos(p / 10000^(2i/D)); computed in double, stored as f32.
std::vector<float> sinusoidalPositionTable(int64_t maxLen, int64_t dim);
}  // namespace tfmc
