// Text input hygiene for the tools that read user text (translate, training corpora).
#pragma once

#include <string>

namespace tfmdata {

// Replaces every byte sequence that is not valid UTF-8 (stray continuation bytes, truncated
// sequences, overlong forms, surrogates, code points past U+10FFFF) with U+FFFD, one per byte;
// returns whether any was. Valid text is left untouched.
bool sanitiseUtf8(std::string &line);

}  // namespace tfmdata
