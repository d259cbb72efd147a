#include "file_io.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"

namespace tfmrt {

namespace {
// An open regular file: stat once, on the descriptor, so the checks and the size describe the
// file that is then read or mapped (not whatever the path names by then).
struct OpenFile {
  int fd = -1;
  size_t size = 0;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
  Status open(const std::string &path, const char *what) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer (it is then
    // refused as not a regular file); reads of regular files ignore the flag.
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return ioError(cat("cannot open ", what, " '", path, "': ", std::strerror(errno)));
    struct stat st;
    if (::fstat(fd, &st) != 0) return ioError(cat("cannot open ", what, " '", path, "': ", std::strerror(errno)));
    if (!S_ISREG(st.st_mode)) return ioError(cat("cannot read ", what, " '", path, "': not a regular file"));
    size = size_t(st.st_size);
    return Status::OK();
  }
  Status readAll(const std::string &path, const char *what, std::vector<uint8_t> &bytes) const {
    bytes.resize(size);
    size_t got = 0;
    while (got < size) {
      const ssize_t n = ::read(fd, bytes.data() + got, size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const std::string why = n < 0 ? cat(": ", std::strerror(errno)) : std::string();
        return ioError(cat("failed reading ", what, " '", path, "' (read ", got, " of ", size, " bytes)", why));
      }
      got += size_t(n);
    }
    return Status::OK();
  }
};
}  // namespace

Status readFileBytes(const std::string &path, const char *what, std::vector<uint8_t> &bytes) {
  OpenFile file;
  TFMRT_RETURN_IF_ERROR(file.open(path, what));
  return file.readAll(path, what, bytes);
}

FileView::~FileView() {
  if (mapped_) ::munmap(mapped_, size_);
}

Status FileView::open(const std::string &path, const char *what) {
  OpenFile file;
  TFMRT_RETURN_IF_ERROR(file.open(path, what));
  if (file.size > 0) {
    void *p = ::mmap(nullptr, file.size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, file.fd, 0);
    if (p != MAP_FAILED) {
      mapped_ = static_cast<uint8_t *>(p);
      size_ = file.size;
      return Status::OK();
    }
  }
  TFMRT_RETURN_IF_ERROR(file.readAll(path, what, copy_));  // empty, or a file that cannot be mapped
  size_ = copy_.size();
  return Status::OK();
}

Status outputTarget(const std::string &path, const char *what, std::string &target, bool &inPlace) {
  if (path.empty()) return invalidArgument(cat("no path given for the ", what));
  target = path;
  inPlace = false;
  struct stat st;
  // An open descriptor (/dev/stdout, /dev/fd/N, /proc/self/fd/N: links to a pipe, a socket or the
  // file the shell opened, maybe for appending) is written through, never renamed over.
  for (const char *prefix : {"/dev/std", "/dev/fd/", "/proc/"})
    if (path.rfind(prefix, 0) == 0) {
      inPlace = true;
      return Status::OK();
    }
  const bool exists = ::stat(path.c_str(), &st) == 0;  // through any links
  if (exists && S_ISDIR(st.st_mode)) return ioError(cat("cannot write ", what, " '", path, "': it is a directory"));
  // A device or pipe (/dev/null, a FIFO) is written into: a temporary file renamed over it would
  // replace the device node.
  if (exists && !S_ISREG(st.st_mode)) {
    inPlace = true;
    return Status::OK();
  }
  // A symbolic link: the file it names is written (replacing the link by a regular file left its
  // target stale); a link to nothing is refused.
  struct stat lst;
  if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    char *resolved = ::realpath(path.c_str(), nullptr);
    if (!resolved)
      return ioError(cat("cannot write ", what, " '", path, "': it is a symbolic link that cannot be followed (",
                         std::strerror(errno), ")"));
    target = resolved;
    std::free(resolved);
  }
  return Status::OK();
}

bool sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  return !a.empty() && !b.empty() && ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
         S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

Status refuseOverwriting(const std::string &output, const char *what, const std::vector<std::string> &inputs) {
  for (const std::string &in : inputs)
    if (sameFile(output, in))
      return invalidArgument(cat("the ", what, " '", output, "' is also an input ('", in,
                                 "'): writing it would destroy that input; choose another path"));
  return Status::OK();
}

std::string resolvedOutputPath(const std::string &path) {
  if (path.empty()) return path;
  if (char *resolved = ::realpath(path.c_str(), nullptr)) {  // exists (a link: its target)
    std::string r = resolved;
    std::free(resolved);
    return r;
  }
  // Not there yet: its directory resolved, then its name.
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  char *resolved = ::realpath(dir.c_str(), nullptr);
  if (!resolved) return path;  // its directory is missing: the write will say so
  std::string r = resolved;
  std::free(resolved);
  return (r == "/" ? r : r + "/") + name;
}

Status refuseSharedOutputs(const std::vector<std::pair<std::string, const char *>> &outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].first.empty()) continue;
    const std::string a = resolvedOutputPath(outputs[i].first);
    struct stat st;
    if (::stat(a.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) continue;  // /dev/null, a FIFO
    for (size_t j = i + 1; j < outputs.size(); ++j)
      if (!outputs[j].first.empty() &&
          (resolvedOutputPath(outputs[j].first) == a || sameFile(outputs[i].first, outputs[j].first)))
        return invalidArgument(cat("the ", outputs[i].second, " '", outputs[i].first, "' and the ", outputs[j].second,
                                   " '", outputs[j].first, "' are one file: one write would replace the other; ",
                                   "choose different paths"));
  }
  return Status::OK();
}

Status checkWritable(const std::string &path, const char *what) {
  std::string target;
  bool inPlace = false;
  TFMRT_RETURN_IF_ERROR(outputTarget(path, what, target, inPlace));
  auto cannot = [&](int e) { return ioError(cat("cannot write ", what, " '", path, "': ", std::strerror(e))); };
  // A device, FIFO or descriptor is only checked, never opened (closing a FIFO ends its reader);
  // an existing file must be writable; a new one's directory is probed with the writer's
  // temporary name.
  if (inPlace || ::access(target.c_str(), F_OK) == 0) return ::access(target.c_str(), W_OK) == 0 ? Status::OK() : cannot(errno);
  const std::string probe = target + ".tmp";
  std::FILE *f = std::fopen(probe.c_str(), "wb");
  if (!f) return cannot(errno);
  std::fclose(f);
  std::remove(probe.c_str());
  return Status::OK();
}

Status writeFileBytes(const std::string &path, const char *what, const void *data, size_t size, bool executable) {
  std::string target;
  bool inPlace = false;
  TFMRT_RETURN_IF_ERROR(outputTarget(path, what, target, inPlace));
  if (inPlace) {  // appending: what a shell's `>>` opened stays (a device or pipe has no end)
    std::FILE *f = std::fopen(target.c_str(), "ab");
    if (!f) return ioError(cat("cannot open ", what, " '", path, "' for writing: ", std::strerror(errno)));
    bool ok = (size ? std::fwrite(data, 1, size, f) == size : true) && std::fflush(f) == 0;
    int e = ok ? 0 : errno;
    if (std::fclose(f) != 0 && ok) ok = false, e = errno;
    if (!ok) return ioError(cat("failed writing ", what, " '", path, "': ", std::strerror(e)));
    return Status::OK();
  }
  std::string tmp = target + ".tmp";
  std::FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f) return ioError(cat("cannot open ", what, " '", path, "' for writing: ", std::strerror(errno)));
  size_t put = size ? std::fwrite(data, 1, size, f) : 0;
  // On disk before the rename: a crash of the machine (not only of the process) then leaves
  // either the old file or the new one.
  bool ok = put == size && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  ok = (std::fclose(f) == 0) && ok;
  if (ok && executable) ok = ::chmod(tmp.c_str(), 0755) == 0;
  if (!ok || std::rename(tmp.c_str(), target.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    return ioError(cat("failed writing ", what, " '", path, "': ", std::strerror(e)));
  }
  return Status::OK();
}

std::string executablePath() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

std::string executableDir() {
  const std::string path = executablePath();
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

}  // namespace tfmrt
