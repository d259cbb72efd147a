#include "entry_plan.h"

#include <new>

#include "format.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

constexpr int64_t kMaxArenaBytes = int64_t(1) << 40;

// The entry input a value derives from through its first data operand (ids for an embedding),
// for naming the caller's tensor in messages; -1 if none.
int64_t sourceInput(const EntryFunction &fn, uint32_t v) {
  for (int hops = 0; hops < 64; ++hops) {
    if (fn.values[v].kind == ValueKind::Input) {
      for (size_t p = 0; p < fn.inputs.size(); ++p)
        if (fn.inputs[p] == v) return int64_t(p);
      return -1;
    }
    if (fn.values[v].kind != ValueKind::Intermediate) return -1;
    const Node *producer = nullptr;
    for (const Node &n : fn.nodes)
      if (n.outputs[0] == v) producer = &n;
    if (!producer) return -1;
    v = producer->op == "tfm.embedding" ? producer->inputs[1] : producer->inputs[0];
  }
  return -1;
}

}  // namespace

std::vector<uint8_t> findKnownBeforeRun(const EntryFunction &fn) {
  std::vector<uint8_t> known(fn.values.size(), 0);
  for (size_t v = 0; v < fn.values.size(); ++v)
    known[v] = fn.values[v].kind == ValueKind::Parameter || fn.values[v].kind == ValueKind::Constant;
  for (const Node &node : fn.nodes) {  // topological order: operands are decided first
    bool all = !node.inputs.empty();
    for (uint32_t v : node.inputs) all = all && known[v];
    for (uint32_t v : node.outputs) known[v] = all;
  }
  return known;
}

std::string inputStr(const EntryFunction &fn, size_t pos) {
  return cat("input '", fn.values[fn.inputs[pos]].name, "' (#", pos, ")");
}

Status checkInputShape(const EntryFunction &fn, size_t pos, const Shape &shape) {
  const ValueInfo &info = fn.values[fn.inputs[pos]];
  // Built only on error: run() checks every call.
  auto where = [&] { return entryStr(fn) + ": " + inputStr(fn, pos); };
  if (shape.size() != info.shape.size())
    return invalidArgument(cat(where(), " must have rank ", info.shape.size(), " (declared ", shapeStr(info.shape),
                               "), got ", shapeStr(shape)));
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) return invalidArgument(cat(where(), " has a negative dim: ", shapeStr(shape)));
    if (info.shape[d] != kDynamicDim && shape[d] != info.shape[d])
      return invalidArgument(cat(where(), " dim ", d, " must be ", info.shape[d], " (declared ", shapeStr(info.shape),
                                 "), got ", shapeStr(shape)));
  }
  return Status::OK();
}

Status checkInputShapes(const EntryFunction &fn, const std::vector<Shape> &shapes) {
  if (shapes.size() != fn.inputs.size()) {
    std::string names;
    for (uint32_t v : fn.inputs) names += cat(names.empty() ? "" : ", ", fn.values[v].name);
    return invalidArgument(cat(entryStr(fn), " expects ", fn.inputs.size(), " inputs (", names, "), got ", shapes.size()));
  }
  for (size_t p = 0; p < shapes.size(); ++p) TFMRT_RETURN_IF_ERROR(checkInputShape(fn, p, shapes[p]));
  return Status::OK();
}

Status inferEntryShapes(const EntryFunction &fn, const std::vector<uint8_t> &knownBeforeRun,
                        const std::vector<const Shape *> &inputShapes, EntryShapes &out,
                        const std::vector<const Shape *> &stateShapes) {
  out.shapes.assign(fn.values.size(), Shape());
  out.bytes.assign(fn.values.size(), 0);
  for (size_t v = 0; v < fn.values.size(); ++v) {
    if (fn.values[v].kind == ValueKind::Parameter || fn.values[v].kind == ValueKind::Constant)
      out.shapes[v] = fn.values[v].shape;
    if (fn.values[v].kind == ValueKind::State) {
      if (fn.values[v].index >= stateShapes.size())
        return invalidArgument(cat(entryStr(fn), " uses session state '", fn.values[v].name, "' that is not bound"));
      out.shapes[v] = *stateShapes[fn.values[v].index];
    }
  }
  for (size_t p = 0; p < inputShapes.size(); ++p) out.shapes[fn.inputs[p]] = *inputShapes[p];

  std::vector<const Shape *> in;
  int64_t total = 0;
  for (size_t i = 0; i < fn.nodes.size(); ++i) {
    const Node &node = fn.nodes[i];
    const std::string where = entryStr(fn) + ": " + nodeStr(i, node);
    if (node.op == "tfm.add_positions") {  // name the caller's input when a sequence is too long
      const Shape &x = out.shapes[node.inputs[0]];
      const ValueInfo &table = fn.values[node.inputs[1]];
      const int64_t rows = out.shapes[node.inputs[1]][0];
      const int64_t src = sourceInput(fn, node.inputs[0]);
      if (x.size() == 3 && x[1] > rows && src >= 0)
        return invalidArgument(cat(entryStr(fn), ": ", inputStr(fn, size_t(src)), " has length ", x[1], " (shape ",
                                   shapeStr(*inputShapes[size_t(src)]), ") but position table '", table.name,
                                   "' has only ", rows, " rows (", nodeStr(i, node), ")"));
    }
    in.clear();
    for (uint32_t v : node.inputs) in.push_back(&out.shapes[v]);
    const uint32_t result = node.outputs[0];
    Shape &shape = out.shapes[result];
    Status s = inferShape(node, in, shape);
    if (!s.ok()) return Status(s.code(), cat(where, ": ", s.message()));
    const ValueInfo &info = fn.values[result];
    if (info.kind == ValueKind::State) {  // updated in place: the state keeps its bound shape
      if (!shapesCompatible(info.shape, shape) || shape != *stateShapes[info.index])
        return invalidArgument(cat(where, ": state '", info.name, "' would change shape from ",
                                   shapeStr(*stateShapes[info.index]), " to ", shapeStr(shape)));
      out.shapes[result] = *stateShapes[info.index];
      continue;
    }
    if (!shapesCompatible(info.shape, shape))
      return invalidArgument(cat(where, ": result '", info.name, "' has shape ", shapeStr(shape),
                                 " at run time, but the artifact declares ", shapeStr(info.shape)));
    int64_t numel;
    if (!checkedNumel(shape, kMaxArenaBytes, numel) || numel > (kMaxArenaBytes - total) / 8)
      return invalidArgument(cat(where, ": result shape ", shapeStr(shape), " is too large"));
    if (knownBeforeRun[result]) continue;  // lives in a persistent buffer, not in the arena
    out.bytes[result] = size_t(numel) * dtypeSize(info.dtype);
    total += int64_t(out.bytes[result]);
  }
  return Status::OK();
}

MemoryPlanSummary summarizePlan(const std::vector<size_t> &bytes, const MemoryPlan &plan) {
  MemoryPlanSummary s;
  s.arena_bytes = int64_t(plan.arenaBytes);
  for (size_t b : bytes) {
    if (b == 0) continue;
    s.total_intermediate_bytes += int64_t((b + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment);
    s.num_buffers += 1;
  }
  return s;
}

Status planArtifactMemory(const Artifact &artifact, const std::string &entry,
                          const std::vector<std::vector<int64_t>> &inputShapes, MemoryPlanSummary &summary) {
  try {
    TFMRT_RETURN_IF_ERROR(validateArtifact(artifact));
    const EntryFunction *fn = artifact.findFunction(entry);
    if (!fn) {
      std::string names;
      for (const auto &f : artifact.functions) names += cat(names.empty() ? "" : ", ", "'", f.name, "'");
      return notFound(cat("no entry function '", entry, "' in model '", artifact.modelName, "' (it has ",
                          names.empty() ? std::string("none") : names, ")"));
    }
    for (size_t i = 0; i < fn->nodes.size(); ++i) {
      Status s = verifyNodeSchema(*fn, fn->nodes[i]);
      if (!s.ok()) return Status(s.code(), cat(entryStr(*fn), ": ", nodeStr(i, fn->nodes[i]), ": ", s.message()));
    }
    TFMRT_RETURN_IF_ERROR(checkInputShapes(*fn, inputShapes));
    std::vector<const Shape *> in;
    // Static states (Adam moments) have their declared shapes; a cache's are bound per Session.
    std::vector<const Shape *> states;
    for (const StateInfo &st : artifact.states) states.push_back(&st.shape);
    if (artifact.usesDynamicState(*fn))
      return invalidArgument(cat("entry '", entry, "' uses session state bound per Session (a K/V cache): its memory "
                                 "is planned when the Session binds it"));
    for (const Shape &s : inputShapes) in.push_back(&s);
    EntryShapes shapes;
    TFMRT_RETURN_IF_ERROR(inferEntryShapes(*fn, findKnownBeforeRun(*fn), in, shapes, states));
    summary = summarizePlan(shapes.bytes, planMemory(*fn, shapes.bytes));
    return Status::OK();
  } catch (const std::bad_alloc &) {
    return outOfMemory(cat("entry '", entry, "': out of memory while planning memory"));
  }
}

}  // namespace tfmrt
