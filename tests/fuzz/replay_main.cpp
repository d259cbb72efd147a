// Runs LLVMFuzzerTestOneInput over every file named on the command line (directories: every
// file inside), as libFuzzer does when given a corpus without mutation. Used by CTest.
#include <dirent.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "FuzzTarget.h"

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

namespace {

int replay(const std::string &path, int &files) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "replay: cannot open '%s'\n", path.c_str());
    return 1;
  }
  if (S_ISDIR(st.st_mode)) {
    DIR *dir = ::opendir(path.c_str());
    if (!dir) return 1;
    std::vector<std::string> names;
    while (dirent *e = ::readdir(dir))
      if (e->d_name[0] != '.') names.push_back(path + "/" + e->d_name);
    ::closedir(dir);
    int rc = 0;
    for (const std::string &n : names) rc |= replay(n, files);
    return rc;
  }
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  ++files;
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int files = 0, rc = 0;
  for (int i = 1; i < argc; ++i) rc |= replay(argv[i], files);
  std::printf("replayed %d inputs\n", files);
  return rc != 0 || files == 0;
}
