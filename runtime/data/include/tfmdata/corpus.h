// Parallel text corpora for training and evaluation: one sentence per line, plain or gzip.
#pragma once

#include <string>
#include <vector>

#include "tfmrt/status.h"

namespace tfmdata {

// The longest line a corpus or input may have: no sentence is that long, and a file without
// newlines (/dev/zero, a binary) was read until memory ran out.
constexpr size_t kMaxLineBytes = size_t(16) << 20;
std::string lineTooLongMessage(size_t line, const std::string &what);

// Reads every line of `path` (gzip-compressed or plain: zlib reads both), without the newline;
// refuses a line longer than kMaxLineBytes.
tfmrt::Status readLines(const std::string &path, std::vector<std::string> &lines);

// The files directly in a corpus directory (--data: every split and language, plain or gzip),
// for refusing an output path that would overwrite one of them. Empty when `dir` is empty or
// cannot be listed.
std::vector<std::string> corpusDirectoryFiles(const std::string &dir);
// <dir>/<split>.<lang>.gz, or <dir>/<split>.<lang> when only that exists (the .gz name when neither).
std::string corpusSideFile(const std::string &dir, const std::string &split, const std::string &lang);
// corpusSideFile, refusing a directory that holds both <split>.<lang>.gz and <split>.<lang>
// (one of them was read silently: an edited copy beside the original).
tfmrt::Status findCorpusSideFile(const std::string &dir, const std::string &split, const std::string &lang,
                                 std::string &path);

struct ParallelCorpus {
  std::vector<std::string> src, tgt;  // line i of both sides is a translation pair
};

// <dir>/<split>.<lang>.gz (or without .gz) for both languages, e.g. multi30k's train.de.gz and
// train.en.gz. Unequal line counts are an error naming both files and counts.
tfmrt::Status readParallel(const std::string &dir, const std::string &split, const std::string &srcLang,
                           const std::string &tgtLang, ParallelCorpus &out);

}  // namespace tfmdata
