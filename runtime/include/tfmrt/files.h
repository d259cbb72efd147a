// Writing output files safely, for the runtime and the command-line tools.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "tfmrt/status.h"

namespace tfmrt {

// Writes to a temporary file in the same directory and renames it over `path`, so a failed or
// interrupted write never leaves a truncated file behind. A symbolic link is followed (its target
// is replaced, the link kept); a device, FIFO or open descriptor (/dev/null, /dev/stdout,
// /dev/fd/N) is written into (appended to); a directory or an empty path is refused.
// `executable`: mode 0755.
Status writeFileBytes(const std::string &path, const char *what, const void *data, size_t size, bool executable = false);
// Where writeFileBytes writes `path` and whether in place (a device or FIFO): the checks above.
Status outputTarget(const std::string &path, const char *what, std::string &target, bool &inPlace);
// Whether writeFileBytes (or a plain write) could write `path`, checked before long work without
// creating or changing it ("cannot write <what> '<path>': <reason>" if not).
Status checkWritable(const std::string &path, const char *what);
// Both name one existing regular file (same device and inode, through links and relative paths).
bool sameFile(const std::string &a, const std::string &b);
// An error when `output` is one of `inputs` (compile -o spec.yaml, run --output model.tfmx, ...).
Status refuseOverwriting(const std::string &output, const char *what, const std::vector<std::string> &inputs);
// The file an output path will be written as, whether it exists yet or not: links and relative
// parts of its directory resolved, a link as the last part followed. Empty for an empty path.
std::string resolvedOutputPath(const std::string &path);
// An error when two of `outputs` (path, what it is) would be written to one file (train
// --checkpoint x --save-weights x: the later write replaced the earlier). Devices and FIFOs
// (/dev/null) may be shared; empty paths are skipped.
Status refuseSharedOutputs(const std::vector<std::pair<std::string, const char *>> &outputs);
// The running program's file (/proc/self/exe), empty if unknown, and its directory ("." if
// unknown): where tfmc finds what is built next to it (tfm-embedded, its plugins).
std::string executablePath();
std::string executableDir();

}  // namespace tfmrt
