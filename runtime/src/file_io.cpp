#include "file_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"

namespace tfmrt {

Status readFileBytes(const std::string &path, const char *what, std::vector<uint8_t> &bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return ioError(cat("cannot open ", what, " '", path, "': ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return ioError(cat("cannot read ", what, " '", path, "': not a regular file"));
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) return ioError(cat("cannot open ", what, " '", path, "': ", std::strerror(errno)));
  bytes.resize(size_t(st.st_size));
  size_t got = bytes.empty() ? 0 : std::fread(bytes.data(), 1, bytes.size(), f);
  bool err = std::ferror(f);
  std::fclose(f);
  if (err || got != bytes.size())
    return ioError(cat("failed reading ", what, " '", path, "' (read ", got, " of ", bytes.size(), " bytes)"));
  return Status::OK();
}

FileView::~FileView() {
  if (mapped_) ::munmap(mapped_, size_);
}

Status FileView::open(const std::string &path, const char *what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return ioError(cat("cannot open ", what, " '", path, "': ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return ioError(cat("cannot read ", what, " '", path, "': not a regular file"));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ioError(cat("cannot open ", what, " '", path, "': ", std::strerror(errno)));
  struct stat fst;
  void *p = MAP_FAILED;
  if (::fstat(fd, &fst) == 0 && fst.st_size > 0)
    p = ::mmap(nullptr, size_t(fst.st_size), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (p != MAP_FAILED) {
    mapped_ = static_cast<uint8_t *>(p);
    size_ = size_t(fst.st_size);
    return Status::OK();
  }
  TFMRT_RETURN_IF_ERROR(readFileBytes(path, what, copy_));  // empty, or a file that cannot be mapped
  size_ = copy_.size();
  return Status::OK();
}

Status writeFileBytes(const std::string &path, const char *what, const void *data, size_t size) {
  std::string tmp = path + ".tmp";
  std::FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f) return ioError(cat("cannot open ", what, " '", path, "' for writing: ", std::strerror(errno)));
  size_t put = size ? std::fwrite(data, 1, size, f) : 0;
  // On disk before the rename: a crash of the machine (not only of the process) then leaves
  // either the old file or the new one.
  bool ok = put == size && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    return ioError(cat("failed writing ", what, " '", path, "': ", std::strerror(e)));
  }
  return Status::OK();
}

}  // namespace tfmrt
