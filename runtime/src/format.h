// Small string helpers shared by error messages across the runtime.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "tfmrt/artifact.h"

namespace tfmrt {

// "[2, ?, 512]"; kDynamicDim prints as "?".
inline std::string shapeStr(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += shape[i] == kDynamicDim ? std::string("?") : std::to_string(shape[i]);
  }
  return s + "]";
}

// "node 7 (tfm.matmul at spec.yaml:12:5)" -- how every node-level error names its node.
inline std::string nodeStr(size_t index, const Node &node) {
  std::string s = "node " + std::to_string(index) + " (" + node.op;
  if (!node.loc.empty()) s += " at " + node.loc;
  return s + ")";
}

// Concatenates streamable values: cat("got ", 3, " dims").
template <typename... Args>
std::string cat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// Product of dims with overflow detection; false if a dim is negative or the product exceeds
// `limit`.
inline bool checkedNumel(const std::vector<int64_t> &shape, int64_t limit, int64_t &numel) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > limit / d) return false;
    n *= d;
  }
  numel = n;
  return true;
}

}  // namespace tfmrt
