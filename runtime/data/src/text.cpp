#include "tfmdata/text.h"

#include <cstdint>

namespace tfmdata {

bool sanitiseUtf8(std::string &line) {
  std::string out;
  bool bad = false;
  const auto *p = reinterpret_cast<const unsigned char *>(line.data());
  const size_t n = line.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) ok = (p[i + k] & 0xC0) == 0x80;
    if (ok && len > 1) {  // no overlong forms, surrogates or code points past U+10FFFF
      uint32_t cp = c & (0x7F >> len);
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (p[i + k] & 0x3F);
      ok = cp >= (len == 2 ? 0x80u : len == 3 ? 0x800u : 0x10000u) && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
    }
    if (ok) {
      out.append(line, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      bad = true;
      ++i;
    }
  }
  if (bad) line = std::move(out);
  return bad;
}

}  // namespace tfmdata
