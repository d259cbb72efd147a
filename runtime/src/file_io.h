// Whole-file reads and writes with Status errors (artifacts, safetensors).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tfmrt/status.h"

namespace tfmrt {

// `what` names the kind of file in messages ("artifact", "weights file").
Status readFileBytes(const std::string &path, const char *what, std::vector<uint8_t> &bytes);
// Writes to a temporary file in the same directory and renames it over `path`, so a failed or
// interrupted write never leaves a truncated file behind.
Status writeFileBytes(const std::string &path, const char *what, const void *data, size_t size);

}  // namespace tfmrt
