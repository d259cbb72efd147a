// Static buffer planning for one entry function at one set of shapes: every intermediate gets an
// offset into a single arena, and intermediates whose lifetimes do not overlap share memory.
#pragma once

#include <cstddef>
#include <vector>

#include "tfmrt/artifact.h"

namespace tfmrt {

constexpr size_t kBufferAlignment = 64;

struct MemoryPlan {
  std::vector<size_t> offsets;  // per value id; meaningful for intermediates only
  size_t arenaBytes = 0;
};

// `bytes[v]` is the size of value v (ignored unless v is an intermediate; 0 places nothing, as for
// values held outside the arena such as those evaluated when weights are set). A value lives from its
// producing node until its last use (entry outputs until the end); a node's results never share
// memory with its operands. First-fit over the live blocks, 64-byte aligned.
MemoryPlan planMemory(const EntryFunction &fn, const std::vector<size_t> &bytes);

}  // namespace tfmrt
