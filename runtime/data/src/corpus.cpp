#include "tfmdata/corpus.h"

#include <zlib.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace tfmdata {

tfmrt::Status readLines(const std::string &path, std::vector<std::string> &lines) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return tfmrt::ioError("cannot open '" + path + "': " + std::strerror(errno));
  // zlib reads a file that is not gzip as plain text: a .gz that is not gzip (references
  // overwritten by plain text) was read as if nothing were wrong.
  const bool named = path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  if (named && gzdirect(f)) {
    gzclose(f);
    return tfmrt::invalidArgument("'" + path + "' is named .gz but is not gzip-compressed (empty, or plain text?)");
  }
  lines.clear();
  // Split on '\n' by hand: gzgets hands back C strings, so a NUL byte cut its line short and the
  // rest of it ran into the next line, which shifted every later line (a translation out of
  // step with its references, a training pair out of step with its other side).
  std::string line;
  auto finishLine = [&] {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    line.clear();
  };
  char buf[1 << 16];
  int n;
  bool first = true;
  while ((n = gzread(f, buf, sizeof buf)) > 0) {
    // Text compressed twice decompresses to gzip again: it was read as lines of binary.
    if (first && !gzdirect(f) && n >= 2 && uint8_t(buf[0]) == 0x1f && uint8_t(buf[1]) == 0x8b) {
      gzclose(f);
      return tfmrt::invalidArgument("'" + path + "' is compressed twice (it decompresses to gzip data, not text)");
    }
    first = false;
    const char *p = buf, *end = buf + n;
    while (const char *nl = static_cast<const char *>(std::memchr(p, '\n', size_t(end - p)))) {
      line.append(p, size_t(nl - p));
      finishLine();
      p = nl + 1;
    }
    line.append(p, size_t(end - p));
  }
  const int readErrno = errno;
  int err = 0;
  const char *msg = gzerror(f, &err);
  // gzerror's text lives in the gzFile: copy it before gzclose frees it (the message was garbage),
  // without the "<path>: " zlib puts in front.
  std::string why = err == Z_ERRNO ? std::strerror(readErrno) : (msg && *msg ? msg : "zlib error");
  if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);
  gzclose(f);
  if (err != Z_OK && err != Z_STREAM_END) return tfmrt::ioError("cannot read '" + path + "': " + why);
  if (!line.empty()) finishLine();  // the last line, without a newline
  return tfmrt::Status::OK();
}

std::vector<std::string> corpusDirectoryFiles(const std::string &dir) {
  std::vector<std::string> files;
  if (dir.empty()) return files;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) files.push_back(it->path().string());
  return files;
}

namespace {

std::string findSide(const std::string &dir, const std::string &split, const std::string &lang) {
  const std::string base = dir + "/" + split + "." + lang;
  for (const std::string &p : {base + ".gz", base})
    if (std::ifstream(p).good()) return p;
  return base + ".gz";  // the error will name the expected file
}

}  // namespace

tfmrt::Status readParallel(const std::string &dir, const std::string &split, const std::string &srcLang,
                           const std::string &tgtLang, ParallelCorpus &out) {
  const std::string srcPath = findSide(dir, split, srcLang), tgtPath = findSide(dir, split, tgtLang);
  TFMRT_RETURN_IF_ERROR(readLines(srcPath, out.src));
  TFMRT_RETURN_IF_ERROR(readLines(tgtPath, out.tgt));
  if (out.src.size() != out.tgt.size())
    return tfmrt::invalidArgument("'" + srcPath + "' has " + std::to_string(out.src.size()) + " lines but '" + tgtPath + "' has " +
                             std::to_string(out.tgt.size()) + ": a parallel corpus needs one line per sentence pair");
  return tfmrt::Status::OK();
}

}  // namespace tfmdata
