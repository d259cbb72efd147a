// Rendering of spec diagnostics: `file:line:col: error: message`, the source line, a caret.
#include "spec/ModelSpec.h"

namespace tfmc {

std::string SpecDiagnostic::render() const {
  std::string out = file;
  if (line > 0)
    out += ":" + std::to_string(line) + ":" + std::to_string(col);
  out += ": error: " + message + "\n";
  if (line <= 0)
    return out;
  out += sourceLine + "\n";
  // Column is a 1-based byte offset. Keep tabs so the caret lines up under tab-indented text,
  // and emit one space per UTF-8 character rather than per byte.
  for (int i = 0; i + 1 < col; ++i) {
    unsigned char c = i < static_cast<int>(sourceLine.size()) ? sourceLine[i] : ' ';
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
