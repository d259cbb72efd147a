// std::cerr one line per write(2): see Commands.h.
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <streambuf>
#include <string>

#include "Commands.h"

namespace tfmc {
namespace {

class LineBuffer final : public std::streambuf {
public:
  explicit LineBuffer(int fd) : fd_(fd) {}
  ~LineBuffer() override { writeOut(); }

protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    line_.push_back(char(c));
    if (c == '\n') writeOut();
    return c;
  }
  std::streamsize xsputn(const char *s, std::streamsize n) override {
    for (std::streamsize i = 0; i < n; ++i) overflow(static_cast<unsigned char>(s[i]));
    return n;
  }
  // std::cerr is unitbuf (flushed after every <<): a line goes out when it ends, not piecewise.
  int sync() override { return 0; }

private:
  void writeOut() {
    size_t done = 0;
    while (done < line_.size()) {
      const ssize_t n = ::write(fd_, line_.data() + done, line_.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // stderr closed: nothing else to do with the message
      done += size_t(n);
    }
    line_.clear();
  }
  int fd_;
  std::string line_;
};

}  // namespace

LineAtomicStderr::LineAtomicStderr() : buffer_(new LineBuffer(STDERR_FILENO)), previous_(std::cerr.rdbuf(buffer_)) {}

LineAtomicStderr::~LineAtomicStderr() {
  std::cerr.rdbuf(previous_);
  delete buffer_;  // writes a last unfinished line
}

}  // namespace tfmc
