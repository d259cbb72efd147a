// Model::run: input validation, per-shape plans (shapes + buffer arena, cached), node execution.
#include <chrono>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "format.h"
#include "memory_planner.h"
#include "model_impl.h"

namespace tfmrt {
namespace {

constexpr size_t kMaxShapePlans = 16;              // per entry; least recently used is evicted
constexpr int64_t kMaxArenaBytes = int64_t(1) << 40;

// Applies RuntimeOptions::num_threads to the calling thread for the duration of a call.
class OmpThreadsScope {
public:
  explicit OmpThreadsScope(int n) : active_(n > 0) {
    if (active_) {
      saved_ = omp_get_max_threads();
      omp_set_num_threads(n);
    }
  }
  ~OmpThreadsScope() {
    if (active_) omp_set_num_threads(saved_);
  }

private:
  bool active_;
  int saved_ = 0;
};

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

std::string inputStr(const EntryFunction &fn, size_t pos) {
  return cat("input '", fn.values[fn.inputs[pos]].name, "' (#", pos, ")");
}

Status checkInputs(const EntryFunction &fn, const std::vector<Tensor> &inputs) {
  if (inputs.size() != fn.inputs.size()) {
    std::string names;
    for (uint32_t v : fn.inputs) names += cat(names.empty() ? "" : ", ", fn.values[v].name);
    return invalidArgument(cat(entryStr(fn), " expects ", fn.inputs.size(), " inputs (", names, "), got ", inputs.size()));
  }
  for (size_t p = 0; p < inputs.size(); ++p) {
    const ValueInfo &info = fn.values[fn.inputs[p]];
    const Tensor &t = inputs[p];
    // Built only on error: this runs on every call.
    auto where = [&] { return entryStr(fn) + ": " + inputStr(fn, p); };
    if (t.dtype != info.dtype)
      return invalidArgument(cat(where(), " must be ", dtypeName(info.dtype), ", got ", dtypeName(t.dtype)));
    if (t.shape.size() != info.shape.size())
      return invalidArgument(cat(where(), " must have rank ", info.shape.size(), " (declared ", shapeStr(info.shape),
                                 "), got ", shapeStr(t.shape)));
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] < 0) return invalidArgument(cat(where(), " has a negative dim: ", shapeStr(t.shape)));
      if (info.shape[d] != kDynamicDim && t.shape[d] != info.shape[d])
        return invalidArgument(cat(where(), " dim ", d, " must be ", info.shape[d], " (declared ", shapeStr(info.shape),
                                   "), got ", shapeStr(t.shape)));
    }
    if (!t.valid()) return invalidArgument(cat(where(), " ", t.describe(), " has storage smaller than its shape"));
  }
  return Status::OK();
}

}  // namespace

Status Model::run(const std::string &entry, const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs) {
  try {
    OmpThreadsScope threads(impl_->options.num_threads);
    return impl_->run(entry, inputs, outputs);
  } catch (const std::bad_alloc &) {
    return internalError(cat("entry '", entry, "': out of memory"));
  } catch (const std::exception &e) {
    return internalError(cat("entry '", entry, "': unexpected error: ", e.what()));
  }
}

Status Model::Impl::run(const std::string &entry, const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs) {
  EntryState *state = findEntry(entry);
  if (!state) {
    std::string names;
    for (const auto &fn : artifact.functions) names += cat(names.empty() ? "" : ", ", "'", fn.name, "'");
    return notFound(cat("no entry function '", entry, "' in model '", artifact.modelName, "' (it has ",
                        names.empty() ? std::string("none") : names, ")"));
  }
  const EntryFunction &fn = *state->fn;
  if (!hasWeights && !artifact.params.empty())
    return invalidArgument(cat(entryStr(fn), ": weights are not set: call initWeights(seed) or loadWeights(path) before run()"));
  TFMRT_RETURN_IF_ERROR(checkInputs(fn, inputs));

  // The plan for these input shapes: cached, else built (shape inference + buffer planning).
  ShapePlan *plan = nullptr;
  for (auto &p : state->plans) {
    bool same = true;
    for (size_t i = 0; i < inputs.size() && same; ++i) same = p->inputShapes[i] == inputs[i].shape;
    if (same) {
      plan = p.get();
      break;
    }
  }
  if (!plan) {
    auto fresh = std::make_unique<ShapePlan>();
    TFMRT_RETURN_IF_ERROR(buildShapePlan(*state, inputs, *fresh));
    if (state->plans.size() >= kMaxShapePlans) {
      auto oldest = std::min_element(state->plans.begin(), state->plans.end(),
                                     [](const auto &x, const auto &y) { return x->lastUse < y->lastUse; });
      state->plans.erase(oldest);
    }
    state->plans.push_back(std::move(fresh));
    plan = state->plans.back().get();
  }
  plan->lastUse = ++state->clock;

  for (const IdCheck &c : state->idChecks) {
    const Tensor &t = inputs[c.inputPos];
    const int32_t *ids = t.data<int32_t>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) {
      if ((ids[i] >= 0 && ids[i] < c.limit) || (c.allowPad && ids[i] == c.pad)) continue;
      return invalidArgument(cat(entryStr(fn), ": ", inputStr(fn, c.inputPos), " holds id ", ids[i], " at flat position ",
                                 i, " of ", shapeStr(t.shape), ", outside [0, ", c.limit, ") = ", c.what, " (used by ",
                                 nodeStr(c.node, fn.nodes[c.node]), ")"));
    }
  }

  // Bind every value to memory: caller inputs, weights, constants, arena slices.
  uint8_t *arena = static_cast<uint8_t *>(plan->arena.rawData());
  for (size_t v = 0; v < fn.values.size(); ++v) {
    const ValueInfo &info = fn.values[v];
    switch (info.kind) {
    case ValueKind::Input: break;
    case ValueKind::Parameter: state->data[v] = weights.empty() ? nullptr : weights[info.index].rawData(); break;
    case ValueKind::Constant: state->data[v] = constants[info.index].rawData(); break;
    case ValueKind::Intermediate: state->data[v] = arena ? arena + plan->offsets[v] : nullptr; break;
    }
  }
  for (size_t p = 0; p < inputs.size(); ++p) state->data[fn.inputs[p]] = const_cast<void *>(inputs[p].rawData());

  const bool profiling = options.profile;
  for (size_t i = 0; i < fn.nodes.size(); ++i) {
    const Node &node = fn.nodes[i];
    TensorRef *refs = state->refs.data();
    size_t r = 0;
    for (uint32_t v : node.inputs) refs[r++] = {fn.values[v].dtype, &plan->shapes[v], state->data[v]};
    for (uint32_t v : node.outputs) refs[r++] = {fn.values[v].dtype, &plan->shapes[v], state->data[v]};
    KernelArgs args;
    args.inputs = refs;
    args.numInputs = node.inputs.size();
    args.outputs = refs + node.inputs.size();
    args.numOutputs = node.outputs.size();
    args.weightsVersion = weightsVersion;
    const auto start = profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    Status s = state->kernels[i]->run(args);
    if (profiling) {
      KernelProfile &entry = profile[state->kernels[i]->name()];
      entry.calls += 1;
      entry.millis += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    if (!s.ok())
      return Status(s.code(), cat(entryStr(fn), ": ", nodeStr(i, node), " [", state->kernels[i]->name(), "]: ", s.message()));
  }

  outputs.resize(fn.outputs.size());
  for (size_t o = 0; o < fn.outputs.size(); ++o) {
    const uint32_t v = fn.outputs[o];
    outputs[o].resize(fn.values[v].dtype, plan->shapes[v]);
    if (outputs[o].nbytes()) std::memcpy(outputs[o].rawData(), state->data[v], outputs[o].nbytes());
  }
  return Status::OK();
}

Status Model::Impl::buildShapePlan(EntryState &state, const std::vector<Tensor> &inputs, ShapePlan &plan) {
  const EntryFunction &fn = *state.fn;
  plan.inputShapes.clear();
  for (const Tensor &t : inputs) plan.inputShapes.push_back(t.shape);
  plan.shapes.assign(fn.values.size(), Shape());
  for (size_t v = 0; v < fn.values.size(); ++v)
    if (fn.values[v].kind == ValueKind::Parameter || fn.values[v].kind == ValueKind::Constant)
      plan.shapes[v] = fn.values[v].shape;
  for (size_t p = 0; p < inputs.size(); ++p) plan.shapes[fn.inputs[p]] = inputs[p].shape;

  std::vector<const Shape *> in;
  std::vector<size_t> bytes(fn.values.size(), 0);
  int64_t total = 0;
  for (size_t i = 0; i < fn.nodes.size(); ++i) {
    const Node &node = fn.nodes[i];
    const std::string where = entryStr(fn) + ": " + nodeStr(i, node);
    if (node.op == "tfm.add_positions") {  // name the caller's input when a sequence is too long
      const Shape &x = plan.shapes[node.inputs[0]];
      const ValueInfo &table = fn.values[node.inputs[1]];
      int64_t rows = plan.shapes[node.inputs[1]][0];
      int64_t src = sourceInput(fn, node.inputs[0]);
      if (x.size() == 3 && x[1] > rows && src >= 0)
        return invalidArgument(cat(entryStr(fn), ": ", inputStr(fn, size_t(src)), " has length ", x[1], " (shape ",
                                   shapeStr(inputs[size_t(src)].shape), ") but position table '", table.name, "' has only ",
                                   rows, " rows (", nodeStr(i, node), ")"));
    }
    in.clear();
    for (uint32_t v : node.inputs) in.push_back(&plan.shapes[v]);
    Shape &out = plan.shapes[node.outputs[0]];
    Status s = inferShape(node, in, out);
    if (!s.ok()) return Status(s.code(), cat(where, ": ", s.message()));
    const ValueInfo &result = fn.values[node.outputs[0]];
    if (!shapesCompatible(result.shape, out))
      return invalidArgument(cat(where, ": result '", result.name, "' has shape ", shapeStr(out),
                                 " at run time, but the artifact declares ", shapeStr(result.shape)));
    int64_t numel;
    if (!checkedNumel(out, kMaxArenaBytes, numel) || numel > (kMaxArenaBytes - total) / 8)
      return invalidArgument(cat(where, ": result shape ", shapeStr(out), " is too large"));
    bytes[node.outputs[0]] = size_t(numel) * dtypeSize(result.dtype);
    total += int64_t(bytes[node.outputs[0]]);
  }
  MemoryPlan mp = planMemory(fn, bytes);
  plan.offsets = std::move(mp.offsets);
  plan.arena = Tensor(DType::Bool, {int64_t(mp.arenaBytes)});
  return Status::OK();
}

}  // namespace tfmrt
