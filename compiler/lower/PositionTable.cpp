#include "lower/PositionTable.h"

#include <cmath>

namespace tfmc {
std::vector<float> sinusoidalPositionTable(int64_t maxLen, int64_t dim) {
  std::vector<float> table(static_cast<size_t>(maxLen * dim));
  for (int64_t p = 0; p < maxLen; ++p)
    for (int64_t i = 0; i < dim / 2; ++i) {
      double angle = double(p) / std::pow(10000.0, double(2 * i) / double(dim));
      table[p * dim + 2 * i] = static_cast<float>(std::sin(angle));
      table[p * dim + 2 * i + 1] = static_cast<float>(std::cos(angle));
    }
  return table;
}
}  // namespace tfmc
