// Whole-file reads and writes with Status errors (artifacts, safetensors).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tfmrt/files.h"
#include "tfmrt/status.h"

namespace tfmrt {

// `what` names the kind of file in messages ("artifact", "weights file").
Status readFileBytes(const std::string &path, const char *what, std::vector<uint8_t> &bytes);
// A whole file, read-only: mapped (MAP_POPULATE: the page cache's pages, no copy and no zeroing)
// or, where mapping fails, read into memory. For files read once and parsed (checkpoints,
// weights); a file truncated by another process while mapped would fault, so not for files
// others append to.
class FileView {
public:
  FileView() = default;
  FileView(const FileView &) = delete;
  FileView &operator=(const FileView &) = delete;
  ~FileView();
  Status open(const std::string &path, const char *what);
  const uint8_t *data() const { return mapped_ ? mapped_ : copy_.data(); }
  size_t size() const { return size_; }

private:
  uint8_t *mapped_ = nullptr;
  size_t size_ = 0;
  std::vector<uint8_t> copy_;
};

}  // namespace tfmrt
