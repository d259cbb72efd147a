// Rendering of spec diagnostics: `file:line:col: error: message`, the source line, a caret.
#include "spec/ModelSpec.h"

#include <algorithm>

namespace tfmc {

std::string SpecDiagnostic::render() const {
  std::string out = file;
  if (line > 0)
    out += ":" + std::to_string(line) + ":" + std::to_string(col);
  out += ": error: " + message + "\n";
  if (line <= 0)
    return out;
  // A long line (minified YAML, a pasted blob) is shown as a window around the column, so the
  // message stays a few lines; "..." marks what was cut. Cuts never split a UTF-8 character.
  constexpr size_t kBefore = 60, kShown = 160;
  const size_t caret = col > 0 ? static_cast<size_t>(col - 1) : 0;
  auto charStart = [&](size_t i) {
    while (i > 0 && i < sourceLine.size() && (static_cast<unsigned char>(sourceLine[i]) & 0xC0) == 0x80)
      --i;
    return i;
  };
  size_t begin = 0, end = sourceLine.size();
  if (sourceLine.size() > kShown) {
    begin = charStart(caret > kBefore ? std::min(caret - kBefore, sourceLine.size()) : 0);
    end = charStart(std::min(begin + kShown, sourceLine.size()));
    if (end <= begin)
      end = std::min(begin + kShown, sourceLine.size());
  }
  const std::string prefix = begin > 0 ? "..." : "";
  out += prefix + sourceLine.substr(begin, end - begin) + (end < sourceLine.size() ? "..." : "") + "\n";
  // Column is a 1-based byte offset. Keep tabs so the caret lines up under tab-indented text,
  // and emit one space per UTF-8 character rather than per byte.
  out += std::string(prefix.size(), ' ');
  for (size_t i = begin; i < caret; ++i) {
    unsigned char c = i < sourceLine.size() ? sourceLine[i] : ' ';
    if ((c & 0xC0) == 0x80)
      continue; // UTF-8 continuation byte
    out += c == '\t' ? '\t' : ' ';
  }
  out += "^\n";
  return out;
}

SpecLoc ModelSpec::locOf(const std::string &dottedKey) const {
  auto it = keyLocs.find(dottedKey);
  if (it != keyLocs.end())
    return it->second;
  auto dot = dottedKey.find('.');
  if (dot != std::string::npos) {
    it = keyLocs.find(dottedKey.substr(0, dot));
    if (it != keyLocs.end())
      return it->second;
  }
  SpecLoc loc;
  loc.file = path;
  return loc;
}

} // namespace tfmc
