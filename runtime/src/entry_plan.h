// Planning one entry function without a Model: which values are known before run(), the concrete
// shape and arena size of every value at given input shapes, and the summary of the buffer plan.
// Model::run and planArtifactMemory both plan through here, so what the compiler reports is what
// run() allocates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memory_planner.h"
#include "shape_inference.h"
#include "tfmrt/runtime.h"

namespace tfmrt {

// Per value id, 1 when the value is known before run(): a parameter, a constant, or the result of
// a node all of whose operands are known (transitively, e.g. tfm.concat of weights). Such nodes
// are evaluated when weights are set, into buffers outside the per-call arena.
std::vector<uint8_t> findKnownBeforeRun(const EntryFunction &fn);

// "entry 'forward'" -- the prefix of every run-time error.
inline std::string entryStr(const EntryFunction &fn) { return "entry '" + fn.name + "'"; }

// "input 'src' (#0)"
std::string inputStr(const EntryFunction &fn, size_t pos);

// One caller input's shape against its declaration (rank, non-negative dims, static dims). The
// message names the entry and the input.
Status checkInputShape(const EntryFunction &fn, size_t pos, const Shape &shape);
// All inputs: the count, then each as above.
Status checkInputShapes(const EntryFunction &fn, const std::vector<Shape> &shapes);

struct EntryShapes {
  std::vector<Shape> shapes;  // per value id
  std::vector<size_t> bytes;  // per value id: bytes in the arena (0 unless a run-time intermediate)
};

// Shape inference over the whole entry for checked input shapes: every result is checked against
// its declared shape; errors name the entry, node (index, op, loc) and, for a too-long sequence,
// the caller's input. Nodes must have passed verifyNodeSchema. `stateShapes` are the bound shapes of
// the session's states (per artifact state), needed by entries that use state.
Status inferEntryShapes(const EntryFunction &fn, const std::vector<uint8_t> &knownBeforeRun,
                        const std::vector<const Shape *> &inputShapes, EntryShapes &out,
                        const std::vector<const Shape *> &stateShapes = {});

// What a plan amounts to: arena size, and the arena buffers without reuse.
MemoryPlanSummary summarizePlan(const std::vector<size_t> &bytes, const MemoryPlan &plan);

}  // namespace tfmrt
