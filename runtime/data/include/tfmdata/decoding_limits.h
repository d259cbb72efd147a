// Bounds of the decoding settings, shared by the spec parser (decoding section) and the search
// (tfmc translate's options), so every spec that compiles makes an artifact translate accepts.
// Header-only and dependency-free: the spec parser includes it without linking the runtime.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

namespace tfmdata {

// Beyond these the length penalty's denominator overflows (every score -0 at alpha 1000) and
// ratio x length + offset nears int64. An offset past max_len is capped by it.
constexpr double kMaxLengthPenalty = 10;
constexpr double kMaxLengthRatio = 1e6;
constexpr int64_t kMaxLengthOffset = int64_t(1) << 20;

// A bound or value for messages: "1e6", not "1e+06"; "0.6", "10".
inline std::string shortNumber(double v) {
  std::ostringstream out;
  out << v;
  std::string text = out.str();
  if (size_t e = text.find("e+"); e != std::string::npos) text.erase(e + 1, text.compare(e + 2, 1, "0") == 0 ? 2 : 1);
  return text;
}

}  // namespace tfmdata
