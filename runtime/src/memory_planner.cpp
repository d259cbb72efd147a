#include "memory_planner.h"

#include <algorithm>

namespace tfmrt {
namespace {

struct Block {
  size_t offset, size;
  uint32_t value;
};

size_t alignUp(size_t n) { return (n + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment; }

}  // namespace

MemoryPlan planMemory(const EntryFunction &fn, const std::vector<size_t> &bytes) {
  const size_t nvalues = fn.values.size();
  const int64_t end = int64_t(fn.nodes.size());
  std::vector<int64_t> lastUse(nvalues, -1);
  for (size_t i = 0; i < fn.nodes.size(); ++i)
    for (uint32_t v : fn.nodes[i].inputs) lastUse[v] = int64_t(i);
  for (uint32_t v : fn.outputs) lastUse[v] = end;

  MemoryPlan plan;
  plan.offsets.assign(nvalues, 0);
  std::vector<Block> live;  // sorted by offset
  auto release = [&](uint32_t v) {
    live.erase(std::remove_if(live.begin(), live.end(), [v](const Block &b) { return b.value == v; }), live.end());
  };
  for (size_t i = 0; i < fn.nodes.size(); ++i) {
    const Node &node = fn.nodes[i];
    for (uint32_t v : node.outputs) {
      const size_t size = alignUp(bytes[v]);
      if (size == 0) continue;
      size_t at = 0;
      auto pos = live.begin();
      for (; pos != live.end(); ++pos) {
        if (pos->offset >= at + size) break;  // the gap before this block fits
        at = std::max(at, pos->offset + pos->size);
      }
      live.insert(pos, Block{at, size, v});
      plan.offsets[v] = at;
      plan.arenaBytes = std::max(plan.arenaBytes, at + size);
    }
    for (uint32_t v : node.inputs)
      if (lastUse[v] == int64_t(i) && fn.values[v].kind == ValueKind::Intermediate) release(v);
    for (uint32_t v : node.outputs)
      if (lastUse[v] == -1) release(v);  // never read and not returned
  }
  return plan;
}

}  // namespace tfmrt
