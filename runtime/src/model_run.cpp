// Model::run: input validation, per-shape plans (shapes + buffer offsets, cached), node execution.
#include <chrono>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <iomanip>

#include "format.h"
#include "memory_planner.h"
#include "model_impl.h"

namespace tfmrt {
namespace {

// Per entry; least recently used is evicted. Plans hold shapes and offsets only (the arena is
// the entry's), so a corpus's many batch shapes can stay cached.
constexpr size_t kMaxShapePlans = 256;

Status checkInputs(const EntryFunction &fn, const std::vector<Tensor> &inputs) {
  if (inputs.size() != fn.inputs.size()) {
    std::string names;
    for (uint32_t v : fn.inputs) names += cat(names.empty() ? "" : ", ", fn.values[v].name);
    return invalidArgument(cat(entryStr(fn), " expects ", fn.inputs.size(), " inputs (", names, "), got ", inputs.size()));
  }
  for (size_t p = 0; p < inputs.size(); ++p) {
    const ValueInfo &info = fn.values[fn.inputs[p]];
    const Tensor &t = inputs[p];
    if (t.dtype != info.dtype)
      return invalidArgument(cat(entryStr(fn), ": ", inputStr(fn, p), " must be ", dtypeName(info.dtype), ", got ",
                                 dtypeName(t.dtype)));
    TFMRT_RETURN_IF_ERROR(checkInputShape(fn, p, t.shape));
    if (!t.valid())
      return invalidArgument(cat(entryStr(fn), ": ", inputStr(fn, p), " ", t.describe(), " has storage smaller than its shape"));
  }
  return Status::OK();
}

// The nodes of runNodes that the wanted outputs depend on, and every node that writes state or
// weights in place (EntryState::writesInPlace); cached per mask.
const std::vector<size_t> &prunedNodes(const EntryState &state, EntryRun &er, const std::vector<bool> &wanted) {
  auto found = er.prunedNodes.find(wanted);
  if (found != er.prunedNodes.end()) return found->second;
  if (er.prunedNodes.size() >= 16) er.prunedNodes.clear();  // callers use one or two masks
  const EntryFunction &fn = *state.fn;
  std::vector<uint8_t> needed(fn.values.size(), 0);
  for (size_t o = 0; o < fn.outputs.size(); ++o)
    if (wanted[o]) needed[fn.outputs[o]] = 1;
  std::vector<size_t> kept;
  for (auto it = state.runNodes.rbegin(); it != state.runNodes.rend(); ++it) {
    const Node &node = fn.nodes[*it];
    bool live = state.writesInPlace[*it];
    for (uint32_t v : node.outputs) live = live || needed[v];
    if (!live) continue;
    kept.push_back(*it);
    for (uint32_t v : node.inputs) needed[v] = 1;
  }
  std::reverse(kept.begin(), kept.end());
  return er.prunedNodes.emplace(wanted, std::move(kept)).first->second;
}

}  // namespace

namespace {

// Session::run's two forms: the Model's lock (shared for inference calls, exclusive for the calls
// Model::Impl::callMutex names), one call at a time per session, the Model's thread count, and
// no exception past the API.
Status runGuarded(Session::Impl &impl, const std::string &entry, const std::vector<Tensor> &inputs,
                  std::vector<Tensor> &outputs, const std::vector<bool> *wanted) {
  try {
    Model::Impl &m = *impl.model;
    EntryState *state = m.findEntry(entry);  // null: run() reports it
    std::lock_guard<std::mutex> busy(impl.busy);
    if (m.options.profile || (state && state->mutatesWeights)) {
      std::unique_lock<CallLock> lock(m.callMutex);
      OmpThreadsScope threads(m.options.num_threads);
      return impl.run(entry, inputs, outputs, wanted);
    }
    for (;;) {
      {
        std::shared_lock<CallLock> lock(m.callMutex);
        if (!state || !m.derivedStale(*state)) {
          OmpThreadsScope threads(m.options.num_threads);
          return impl.run(entry, inputs, outputs, wanted);
        }
      }
      // New weights since the entry last ran: re-derive its values alone, then run shared (again
      // checked: the weights may have changed in between).
      std::unique_lock<CallLock> lock(m.callMutex);
      if (m.derivedStale(*state)) {
        OmpThreadsScope threads(m.options.num_threads);
        TFMRT_RETURN_IF_ERROR(m.evaluateWeightDerived(*state));
      }
    }
  } catch (const std::bad_alloc &) {
    return outOfMemory(cat("entry '", entry, "': out of memory"));
  } catch (const std::exception &e) {
    return internalError(cat("entry '", entry, "': unexpected error: ", e.what()));
  }
}

}  // namespace

Status Model::run(const std::string &entry, const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs) {
  return impl_->session->run(entry, inputs, outputs);
}

Status Session::run(const std::string &entry, const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs) {
  return runGuarded(*impl_, entry, inputs, outputs, nullptr);
}

Status Session::run(const std::string &entry, const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs,
                    const std::vector<bool> &wanted) {
  return runGuarded(*impl_, entry, inputs, outputs, &wanted);
}

Status Session::Impl::run(const std::string &entry, const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs,
                          const std::vector<bool> *wanted) {
  Model::Impl &m = *model;
  const Artifact &artifact = m.artifact;
  EntryState *state = m.findEntry(entry);
  if (!state) {
    std::string names;
    for (const auto &fn : artifact.functions) names += cat(names.empty() ? "" : ", ", "'", fn.name, "'");
    return notFound(cat("no entry function '", entry, "' in model '", artifact.modelName, "' (it has ",
                        names.empty() ? std::string("none") : names, ")"));
  }
  const EntryFunction &fn = *state->fn;
  EntryRun &er = runs[m.entryIndex(*state)];
  if (!m.hasWeights && !artifact.params.empty())
    return invalidArgument(cat(entryStr(fn), ": weights are not set: call initWeights(seed) or loadWeights(path) before run()"));
  TFMRT_RETURN_IF_ERROR(checkInputs(fn, inputs));
  if (wanted && wanted->size() != fn.outputs.size())
    return invalidArgument(cat(entryStr(fn), ": ", wanted->size(), " flags for which outputs to compute, but it has ",
                               fn.outputs.size(), " outputs"));
  const std::vector<size_t> &nodes = wanted ? prunedNodes(*state, er, *wanted) : state->runNodes;
  if (state->usesDynamicState && !dynamicBound)
    return invalidArgument(cat(entryStr(fn), " uses session state (a K/V cache): bind it with Session::bindStates "
                                  "before run()"));
  if (state->usesStaticState) allocateStaticStates();
  // Weights changed since this entry last ran (a training step of another entry): re-derive
  // (runGuarded holds the lock exclusively then).
  if (m.derivedStale(*state)) TFMRT_RETURN_IF_ERROR(m.evaluateWeightDerived(*state));

  // The plan for these input shapes: cached, else built (shape inference + buffer planning).
  ShapePlan *plan = nullptr;
  const int threads = omp_get_max_threads();  // inside run()'s OmpThreadsScope: the run's count
  for (auto &p : er.plans) {
    bool same = p->threads == threads;
    for (size_t i = 0; i < p->stateShapes.size() && same && state->usesState; ++i) same = p->stateShapes[i] == states[i].shape;
    for (size_t i = 0; i < inputs.size() && same; ++i) same = p->inputShapes[i] == inputs[i].shape;
    if (same) {
      plan = p.get();
      break;
    }
  }
  if (!plan) {
    auto fresh = std::make_unique<ShapePlan>();
    TFMRT_RETURN_IF_ERROR(buildShapePlan(*state, inputs, *fresh));
    if (er.plans.size() >= kMaxShapePlans) {
      auto oldest = std::min_element(er.plans.begin(), er.plans.end(),
                                     [](const auto &x, const auto &y) { return x->lastUse < y->lastUse; });
      er.plans.erase(oldest);
    }
    er.plans.push_back(std::move(fresh));
    plan = er.plans.back().get();
  }
  plan->lastUse = ++er.clock;
  er.lastPlan = plan->summary;

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

  // Bind every value to memory: caller inputs, weights, constants, weight-derived buffers, arena
  // slices.
  if (const uint64_t physical = physicalMemoryBytes(); physical && plan->arenaBytes > physical)
    return invalidArgument(cat(entryStr(fn), ": its intermediate values need ", std::fixed, std::setprecision(1),
                               double(plan->arenaBytes) / double(1 << 30), " GiB, more than this machine's ",
                               double(physical) / double(1 << 30), " GiB of memory (a smaller batch needs less)"));
  if (er.arena.nbytes() < plan->arenaBytes) {
    // Grown by at least a quarter: the plan follows the run-time dims, and a length-sorted test
    // set asked for a slightly larger encode arena (fresh pages, zeroed) at nearly every batch.
    const int64_t old = er.arena.nbytes();
    er.arena = Tensor();  // free first: the old and new arena need not coexist
    er.arena = Tensor::largeBuffer(DType::Bool, {std::max<int64_t>(int64_t(plan->arenaBytes), old + old / 4)});
  }
  uint8_t *arena = plan->arenaBytes ? static_cast<uint8_t *>(er.arena.rawData()) : nullptr;
  for (size_t v = 0; v < fn.values.size(); ++v) {
    if (state->knownBeforeRun[v]) er.data[v] = m.knownData(*state, uint32_t(v));
    else if (fn.values[v].kind == ValueKind::Intermediate) er.data[v] = arena ? arena + plan->offsets[v] : nullptr;
    else if (fn.values[v].kind == ValueKind::State) er.data[v] = states[fn.values[v].index].rawData();
  }
  for (size_t p = 0; p < inputs.size(); ++p) er.data[fn.inputs[p]] = const_cast<void *>(inputs[p].rawData());
  // Results computed per call are written straight into the caller's output tensors (resized in
  // place) instead of the arena, saving a copy (decode_step's log-probabilities, forward's
  // logits). Not when a value is returned twice or the output storage overlaps an input.
  // When the caller passes one vector as inputs and outputs, nothing is touched before the run.
  const bool aliased = &inputs == &outputs;
  if (!aliased) outputs.resize(fn.outputs.size());
  er.direct.assign(fn.outputs.size(), 0);
  for (size_t o = 0; o < fn.outputs.size() && !aliased; ++o) {
    const uint32_t v = fn.outputs[o];
    if (wanted && !(*wanted)[o]) continue;
    if (fn.values[v].kind != ValueKind::Intermediate || state->knownBeforeRun[v]) continue;
    if (std::count(fn.outputs.begin(), fn.outputs.end(), v) != 1) continue;
    outputs[o].resize(fn.values[v].dtype, plan->shapes[v]);
    const uint8_t *lo = static_cast<const uint8_t *>(outputs[o].rawData()), *hi = lo + outputs[o].nbytes();
    bool overlaps = false;
    for (const Tensor &in : inputs) {
      const uint8_t *a = static_cast<const uint8_t *>(in.rawData()), *b = a + in.nbytes();
      overlaps = overlaps || (a < hi && lo < b);
    }
    if (overlaps || !outputs[o].nbytes()) continue;
    er.data[v] = outputs[o].rawData();
    er.direct[o] = 1;
  }

  // A training step writes parameters in place (tfm.adam_update): whatever happens below, it
  // ends with a new weights version, so every entry re-derives its weight-derived values (merged
  // projection weights) and packed copies before its next run (above) and no later call mixes new
  // and stale weights. Only entries that run pay for it: refreshing all five of a training
  // artifact after every step took ~33 ms of a ~940 ms small-spec step. (A step that fails
  // midway may have updated some parameters: the caller should restore a checkpoint.)
  struct RefreshAfterUpdate {
    Model::Impl &impl;
    bool active;
    ~RefreshAfterUpdate() { (void)finish(); }  // also when an exception escaped a kernel
    Status finish() {
      if (active) ++impl.weightsVersion;
      active = false;
      return Status::OK();
    }
  } refresh{m, state->mutatesWeights};
  auto fail = [&](Status s) {
    Status r = refresh.finish();
    return s.ok() ? r : s;
  };

  const bool profiling = m.options.profile;
  for (size_t i : nodes) {
    const Node &node = fn.nodes[i];
    TensorRef *refs = er.refs.data();
    size_t r = 0;
    for (uint32_t v : node.inputs) refs[r++] = {fn.values[v].dtype, &plan->shapes[v], er.data[v]};
    for (uint32_t v : node.outputs) refs[r++] = {fn.values[v].dtype, &plan->shapes[v], er.data[v]};
    KernelArgs args;
    args.inputs = refs;
    args.numInputs = node.inputs.size();
    args.outputs = refs + node.inputs.size();
    args.numOutputs = node.outputs.size();
    args.weightsVersion = m.weightsVersion;
    args.scratch = plan->scratchBytes ? arena + plan->scratchOffset : nullptr;
    args.scratchBytes = plan->scratchBytes;
    const auto start = profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    Status s = state->kernels[i]->run(args);
    if (profiling) {
      KernelProfile &entry = m.profile[{fn.name, state->kernels[i]->name()}];
      entry.calls += 1;
      entry.millis += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    if (!s.ok())
      return fail(Status(s.code(), cat(entryStr(fn), ": ", nodeStr(i, node), " [", state->kernels[i]->name(), "]: ",
                                       s.message())));
  }
  TFMRT_RETURN_IF_ERROR(refresh.finish());

  if (aliased) {  // inputs die here: copy the results out of the arena first
    std::vector<Tensor> results(fn.outputs.size());
    for (size_t o = 0; o < fn.outputs.size(); ++o) {
      const uint32_t v = fn.outputs[o];
      if (wanted && !(*wanted)[o]) {
        results[o].resize(fn.values[v].dtype, {0});
        continue;
      }
      results[o].resize(fn.values[v].dtype, plan->shapes[v]);
      if (results[o].nbytes()) std::memcpy(results[o].rawData(), er.data[v], results[o].nbytes());
    }
    outputs = std::move(results);
    return Status::OK();
  }
  outputs.resize(fn.outputs.size());
  for (size_t o = 0; o < fn.outputs.size(); ++o) {
    if (er.direct[o]) continue;  // already written in place
    const uint32_t v = fn.outputs[o];
    if (wanted && !(*wanted)[o]) {
      outputs[o].resize(fn.values[v].dtype, {0});
      continue;
    }
    outputs[o].resize(fn.values[v].dtype, plan->shapes[v]);
    if (outputs[o].nbytes()) std::memcpy(outputs[o].rawData(), er.data[v], outputs[o].nbytes());
  }
  return Status::OK();
}

Status Session::Impl::buildShapePlan(EntryState &state, const std::vector<Tensor> &inputs, ShapePlan &plan) {
  const EntryFunction &fn = *state.fn;
  plan.inputShapes.clear();
  std::vector<const Shape *> in, st;
  for (const Tensor &t : inputs) {
    plan.inputShapes.push_back(t.shape);
    in.push_back(&t.shape);
  }
  plan.stateShapes.clear();
  for (const Tensor &t : states) {
    plan.stateShapes.push_back(t.shape);
    st.push_back(&t.shape);
  }
  EntryShapes shapes;
  TFMRT_RETURN_IF_ERROR(inferEntryShapes(fn, state.knownBeforeRun, in, shapes, st));
  MemoryPlan mp = planMemory(fn, shapes.bytes);
  plan.summary = summarizePlan(shapes.bytes, mp);
  plan.shapes = std::move(shapes.shapes);
  plan.offsets = std::move(mp.offsets);
  // Kernel scratch: the largest need of any node, after the intermediates (nodes run one at a time).
  const int threads = omp_get_max_threads();  // inside run()'s OmpThreadsScope: the run's count
  plan.threads = threads;
  std::vector<const Shape *> operandShapes;
  for (size_t i : state.runNodes) {
    operandShapes.clear();
    for (uint32_t v : fn.nodes[i].inputs) operandShapes.push_back(&plan.shapes[v]);
    plan.scratchBytes = std::max(plan.scratchBytes, state.kernels[i]->scratchBytes(operandShapes, threads));
  }
  plan.scratchOffset = (mp.arenaBytes + 63) / 64 * 64;
  plan.summary.scratch_bytes = int64_t(plan.scratchBytes);
  plan.arenaBytes = plan.scratchOffset + plan.scratchBytes;
  return Status::OK();
}

}  // namespace tfmrt
