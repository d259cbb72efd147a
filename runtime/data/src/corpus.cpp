#include "tfmdata/corpus.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

namespace tfmdata {

namespace {

// Splits decompressed bytes into lines on '\n' by hand: gzgets handed back C strings, so a NUL byte
// cut its line short and the rest of it ran into the next line, which shifted every later line (a
// translation out of step with its references, a training pair out of step with its other side).
class LineSplitter {
public:
  explicit LineSplitter(std::vector<std::string> &lines) : lines_(lines) { lines_.clear(); }
  // False once a line passes kMaxLineBytes: no sentence is that long, and /dev/zero as a corpus
  // was read until memory ran out.
  bool add(const char *p, size_t n) {
    const char *end = p + n;
    while (const char *nl = static_cast<const char *>(std::memchr(p, '\n', size_t(end - p)))) {
      line_.append(p, size_t(nl - p));
      if (line_.size() > kMaxLineBytes) return false;
      finish();
      p = nl + 1;
    }
    line_.append(p, size_t(end - p));
    return line_.size() <= kMaxLineBytes;
  }
  size_t lineNumber() const { return lines_.size() + 1; }  // of the line being read
  void close() {
    if (!line_.empty()) finish();  // the last line, without a newline
  }

private:
  void finish() {
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    lines_.push_back(std::move(line_));
    line_.clear();
  }
  std::vector<std::string> &lines_;
  std::string line_;
};

struct FileCloser {
  void operator()(std::FILE *f) const { std::fclose(f); }
};

bool gzipMagic(const unsigned char *p) { return p[0] == 0x1f && p[1] == 0x8b; }

}  // namespace

std::string lineTooLongMessage(size_t line, const std::string &what) {
  return "line " + std::to_string(line) + " of " + what + " is longer than " + std::to_string(kMaxLineBytes >> 20) +
         " MiB: not a text file of sentences?";
}

tfmrt::Status readLines(const std::string &path, std::vector<std::string> &lines) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) return tfmrt::ioError("cannot open '" + path + "': " + std::strerror(errno));
  auto cannotRead = [&](const std::string &why) { return tfmrt::ioError("cannot read '" + path + "': " + why); };
  // fread sets errno on Linux; "read error" where it did not.
  auto readError = [&] { return cannotRead(errno ? std::strerror(errno) : "read error"); };
  constexpr size_t kChunk = size_t(1) << 16;
  std::vector<unsigned char> in(kChunk), out(kChunk);
  size_t have = 0;  // unread bytes at the front of `in`
  bool atEnd = false;
  // Tops `in` up to at least `want` bytes (fewer at the end of the file); false on a read error.
  auto fill = [&](size_t want) {
    while (have < want && !atEnd) {
      errno = 0;
      const size_t n = std::fread(in.data() + have, 1, in.size() - have, file.get());
      have += n;
      if (n == 0) {
        if (std::ferror(file.get())) return false;
        atEnd = true;
      }
    }
    return true;
  };
  if (!fill(2)) return readError();
  const bool gzip = have >= 2 && gzipMagic(in.data());
  // A .gz that is not gzip (references overwritten by plain text) would be read as if nothing
  // were wrong.
  const bool named = path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  if (named && !gzip)
    return tfmrt::invalidArgument("'" + path + "' is named .gz but is not gzip-compressed (empty, or plain text?)");
  LineSplitter splitter(lines);
  auto tooLong = [&] { return tfmrt::invalidArgument(lineTooLongMessage(splitter.lineNumber(), "'" + path + "'")); };
  if (!gzip) {
    while (have > 0) {
      if (!splitter.add(reinterpret_cast<const char *>(in.data()), have)) return tooLong();
      have = 0;
      if (!fill(1)) return readError();
    }
    splitter.close();
    return tfmrt::Status::OK();
  }
  // Our own inflate loop rather than gzread: zlib's reader stops quietly at bytes after a gzip
  // member that are not another member (a file with something appended, or two files run
  // together), so their lines were lost without a word. Members in a row are read in turn.
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return cannotRead("zlib could not start");  // 16: gzip only
  std::unique_ptr<z_stream, int (*)(z_stream *)> ender(&zs, inflateEnd);
  bool firstOutput = true;
  int64_t members = 1;  // the member being read, from 1
  for (;;) {
    if (have == 0 && !fill(1)) return readError();
    if (have == 0) return cannotRead("unexpected end of file");  // inside a member
    zs.next_in = in.data();
    zs.avail_in = uInt(have);
    int rc;
    do {
      zs.next_out = out.data();
      zs.avail_out = uInt(out.size());
      rc = inflate(&zs, Z_NO_FLUSH);
      if (rc == Z_MEM_ERROR) return cannotRead("out of memory");
      if (rc == Z_DATA_ERROR || rc == Z_STREAM_ERROR || rc == Z_NEED_DICT) {
        const std::string why = zs.msg ? zs.msg : "corrupt gzip data";
        // Bytes after a member that start like a gzip header but are not one.
        if (members > 1 && zs.total_out == 0)
          return cannotRead("the bytes after gzip member " + std::to_string(members - 1) + " are not gzip data (" + why +
                            "): something appended to the file?");
        return cannotRead(why);
      }
      const size_t produced = out.size() - zs.avail_out;
      // Text compressed twice decompresses to gzip again: it was read as lines of binary.
      if (firstOutput && produced >= 2) {
        if (gzipMagic(out.data()))
          return tfmrt::invalidArgument("'" + path + "' is compressed twice (it decompresses to gzip data, not text)");
        firstOutput = false;
      }
      if (!splitter.add(reinterpret_cast<const char *>(out.data()), produced)) return tooLong();
    } while (rc != Z_STREAM_END && zs.avail_out == 0);
    // Keep what inflate has not read at the front of `in`.
    std::memmove(in.data(), zs.next_in, zs.avail_in);
    have = zs.avail_in;
    if (rc != Z_STREAM_END) continue;
    // The end of a member: the file ends, another member follows, or something else does.
    if (!fill(2)) return readError();
    if (have == 0) break;
    if (have < 2 || !gzipMagic(in.data())) {
      size_t trailing = have;
      while (!atEnd) {  // count the rest, for the message
        have = 0;
        if (!fill(1)) return readError();
        trailing += have;
      }
      return cannotRead(std::to_string(trailing) + " bytes after the end of the gzip data (not another gzip member: "
                                                   "something appended to the file?)");
    }
    inflateReset(&zs);
    ++members;
  }
  splitter.close();
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

std::string corpusSideFile(const std::string &dir, const std::string &split, const std::string &lang) {
  const std::string base = dir + "/" + split + "." + lang;
  for (const std::string &p : {base + ".gz", base})
    if (std::ifstream(p).good()) return p;
  return base + ".gz";  // the error will name the expected file
}

tfmrt::Status findCorpusSideFile(const std::string &dir, const std::string &split, const std::string &lang,
                                 std::string &path) {
  const std::string base = dir + "/" + split + "." + lang;
  std::error_code ec;
  if (std::filesystem::is_regular_file(base + ".gz", ec) && std::filesystem::is_regular_file(base, ec))
    return tfmrt::invalidArgument("both '" + base + ".gz' and '" + base +
                                  "' exist: which one is meant? Remove or rename the other");
  path = corpusSideFile(dir, split, lang);
  return tfmrt::Status::OK();
}

tfmrt::Status readParallel(const std::string &dir, const std::string &split, const std::string &srcLang,
                           const std::string &tgtLang, ParallelCorpus &out) {
  std::string srcPath, tgtPath;
  TFMRT_RETURN_IF_ERROR(findCorpusSideFile(dir, split, srcLang, srcPath));
  TFMRT_RETURN_IF_ERROR(findCorpusSideFile(dir, split, tgtLang, tgtPath));
  TFMRT_RETURN_IF_ERROR(readLines(srcPath, out.src));
  TFMRT_RETURN_IF_ERROR(readLines(tgtPath, out.tgt));
  if (out.src.size() != out.tgt.size())
    return tfmrt::invalidArgument("'" + srcPath + "' has " + std::to_string(out.src.size()) + " lines but '" + tgtPath + "' has " +
                             std::to_string(out.tgt.size()) + ": a parallel corpus needs one line per sentence pair");
  return tfmrt::Status::OK();
}

}  // namespace tfmdata
