// Model creation: artifact checks against the op table and declared shapes, kernel selection and
// preparation (once, at load).
#include <algorithm>
#include <cstring>
#include <iomanip>

#include "format.h"
#include "kernels/gemm/packed_gemm.h"
#include "kernels/gemm/packed_gemm_int8.h"
#include "model_impl.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

Status withContext(const std::string &prefix, const Status &s) {
  return s.ok() ? s : Status(s.code(), prefix + ": " + s.message());
}

// The kernel layout a node asks for through its `weight_layout` attribute (Plain if it has none).
Layout nodeLayout(const Node &node) {
  const OpSchema *s = findOpSchema(node.op);
  if (!tfm::rules::findAttr(*s, "weight_layout")) return Layout::Plain;
  const std::string layout = attrString(node, "weight_layout");
  if (layout == "packed") return Layout::Packed;
  if (layout == "packed_bf16") return Layout::PackedBf16;
  if (layout == "packed_int8") return Layout::PackedInt8;
  return Layout::Plain;
}

// A packed weight is reordered when weights are set, so it must be known by then, with a static
// shape. Checked for every backend, so an artifact loads on all of them or on none.
Status checkPackedWeight(const EntryFunction &fn, const Node &node, const std::vector<uint8_t> &known, Layout layout) {
  const uint32_t w = node.inputs[1];
  const ValueInfo &info = fn.values[w];
  if (!known[w]) {
    const char *what = info.kind == ValueKind::Input ? "an entry input" : "computed per call";
    return invalidArgument(cat("weight_layout '", layoutName(layout), "' needs a weight known before run() (a parameter, a constant, or "
                               "computed from those only), but operand #1 '", info.name, "' is ", what));
  }
  for (int64_t d : info.shape)
    if (d < 0) return invalidArgument(cat("weight_layout '", layoutName(layout), "' needs a static weight shape, but operand #1 '", info.name,
                                          "' is declared ", shapeStr(info.shape)));
  return Status::OK();
}

}  // namespace

Model::Model() : impl_(std::make_unique<Impl>()) {}
Model::~Model() = default;

Status Model::load(const std::string &path, const RuntimeOptions &options, std::unique_ptr<Model> &model) {
  Artifact artifact;
  TFMRT_RETURN_IF_ERROR(readArtifactFile(path, artifact));
  return withContext(path, fromArtifact(std::move(artifact), options, model));
}

Status Model::fromArtifact(Artifact artifact, const RuntimeOptions &options, std::unique_ptr<Model> &model) {
  try {
    TFMRT_RETURN_IF_ERROR(validateArtifact(artifact));
    if (options.num_threads < 0 || options.num_threads > kMaxThreads)
      return invalidArgument(cat("the thread count (--threads, or OMP_NUM_THREADS without it) must be in [0, ", kMaxThreads, "], got ", options.num_threads));
    std::unique_ptr<Model> m(new Model());
    Impl &impl = *m->impl_;
    impl.artifact = std::move(artifact);
    impl.options = options;
    // Kernels create their oneDNN primitives here: with the thread count they will run with.
    // A primitive made for 2 threads and run under 1 took ~500x longer on a loaded machine.
    OmpThreadsScope threads(options.num_threads);
    if (options.backend == KernelBackend::Dnnl) TFMRT_RETURN_IF_ERROR(createCpuDevice(impl.device));
    for (const Constant &c : impl.artifact.constants) {
      Tensor t(c.dtype, c.shape);
      if (!c.data.empty()) std::memcpy(t.rawData(), c.data.data(), c.data.size());
      impl.constants.push_back(std::move(t));
    }
    impl.entries.resize(impl.artifact.functions.size());
    for (size_t i = 0; i < impl.artifact.functions.size(); ++i)
      TFMRT_RETURN_IF_ERROR(impl.prepareEntry(impl.artifact.functions[i], impl.entries[i]));
    // Without parameters there are no weights to wait for: derive from the constants now.
    if (impl.artifact.params.empty())
      for (EntryState &state : impl.entries) TFMRT_RETURN_IF_ERROR(impl.evaluateWeightDerived(state));
    TFMRT_RETURN_IF_ERROR(Session::create(*m, impl.session));
    model = std::move(m);
    return Status::OK();
  } catch (const std::bad_alloc &) {
    return outOfMemory("out of memory while loading the model");
  } catch (const std::exception &e) {
    return internalError(cat("unexpected error while loading the model: ", e.what()));
  }
}

Status Model::Impl::prepareEntry(const EntryFunction &fn, EntryState &state) {
  state.fn = &fn;
  state.knownBeforeRun = findKnownBeforeRun(fn);
  state.derived.resize(fn.values.size());
  // Training entries (gradients, accumulation, Adam) change their weights every step: kernels
  // keep derived copies of the weights for them only where it pays at every step. An entry that
  // writes a parameter in place is a training step (see Model::run).
  bool inference = true;
  for (const Node &node : fn.nodes) {
    const std::string &op = node.op;
    bool writes = op == "tfm.adam_update";
    for (uint32_t v : node.outputs) writes = writes || fn.values[v].kind == ValueKind::State;
    state.writesInPlace.push_back(writes);
    if (op == "tfm.adam_update") state.mutatesWeights = true;
    if (tfm::rules::isTrainingOp(op)) inference = false;
  }
  size_t maxArity = 0;
  std::vector<const Shape *> inShapes;
  for (size_t i = 0; i < fn.nodes.size(); ++i) {
    const Node &node = fn.nodes[i];
    const std::string where = entryStr(fn) + ": " + nodeStr(i, node);
    TFMRT_RETURN_IF_ERROR(withContext(where, verifyNodeSchema(fn, node)));

    // Declared shapes must agree with what the operands imply (dynamic dims match anything).
    inShapes.clear();
    for (uint32_t v : node.inputs) inShapes.push_back(&fn.values[v].shape);
    Shape inferred;
    TFMRT_RETURN_IF_ERROR(withContext(where, inferShape(node, inShapes, inferred)));
    const ValueInfo &result = fn.values[node.outputs[0]];
    // A state result is its State operand updated in place: one buffer, so the same value.
    if (result.kind == ValueKind::State &&
        std::find(node.inputs.begin(), node.inputs.end(), node.outputs[0]) == node.inputs.end())
      return invalidArgument(cat(where, ": result '", result.name, "' is session state but not one of the operands "
                                 "(state is only updated in place)"));
    if (!shapesCompatible(result.shape, inferred))
      return invalidArgument(cat(where, ": result '", result.name, "' is declared ", shapeStr(result.shape),
                                 " but its operands imply ", shapeStr(inferred)));

    // Weight-derived results get their persistent buffer now: their operands' shapes are static.
    const uint32_t out = node.outputs[0];
    if (state.knownBeforeRun[out]) {
      int64_t numel;
      if (!checkedNumel(inferred, int64_t(1) << 40, numel))
        return invalidArgument(cat(where, ": result '", result.name, "' is computed from weights only but has shape ",
                                   shapeStr(inferred)));
      // Uninitialised: the weight nodes write all of it before any run() may read it.
      state.derived[out] = Tensor::uninitialized(result.dtype, inferred);
      state.weightNodes.push_back(i);
    } else {
      state.runNodes.push_back(i);
    }

    const Layout layout = nodeLayout(node);
    if (layout != Layout::Plain) TFMRT_RETURN_IF_ERROR(withContext(where, checkPackedWeight(fn, node, state.knownBeforeRun, layout)));
    const DType keyType = fn.values[node.inputs[0]].dtype;
    std::unique_ptr<Kernel> kernel = KernelRegistry::builtin().create(node.op, keyType, layout, options.backend);
    if (!kernel)
      return unimplemented(cat(where, ": no kernel for (", node.op, ", ", dtypeName(keyType), ", ", layoutName(layout),
                               ", ", backendName(options.backend), ")"));
    KernelPrepareInfo info;
    info.node = &node;
    for (uint32_t v : node.inputs) {
      info.inputs.push_back(&fn.values[v]);
      info.knownBeforeRun.push_back(state.knownBeforeRun[v] != 0);
    }
    for (uint32_t v : node.outputs) info.outputs.push_back(&fn.values[v]);
    info.layout = layout;
    info.device = device.get();
    info.fewRowsGemm = options.few_rows_gemm;
    info.inferenceEntry = inference;
    info.fastWeightGrad = options.fast_weight_grad;
    TFMRT_RETURN_IF_ERROR(withContext(where + " [" + kernel->name() + "]", kernel->prepare(info)));
    state.kernels.push_back(std::move(kernel));
    maxArity = std::max(maxArity, node.inputs.size() + node.outputs.size());

    // Token ids coming straight from the caller are range-checked per call, naming the input.
    auto inputPos = [&](uint32_t v) -> int64_t {
      for (size_t p = 0; p < fn.inputs.size(); ++p)
        if (fn.inputs[p] == v) return int64_t(p);
      return -1;
    };
    if (node.op == "tfm.embedding") {
      const ValueInfo &table = fn.values[node.inputs[0]];
      int64_t pos = inputPos(node.inputs[1]);
      if (pos >= 0 && table.shape[0] >= 0)
        state.idChecks.push_back({size_t(pos), table.shape[0], false, 0, i,
                                  cat("the vocabulary of embedding table '", table.name, "'")});
    } else if (node.op == "tfm.label_smoothed_xent") {
      const ValueInfo &logits = fn.values[node.inputs[0]];
      int64_t pos = inputPos(node.inputs[1]);
      if (pos >= 0 && logits.shape.back() >= 0)
        state.idChecks.push_back({size_t(pos), logits.shape.back(), true, int32_t(attrInt(node, "pad_id")), i,
                                  cat("the ", logits.shape.back(), "-way output vocabulary")});
    }
  }
  state.refs.assign(maxArity, TensorRef());
  state.usesState = artifact.usesState(fn);
  state.usesDynamicState = artifact.usesDynamicState(fn);
  for (const ValueInfo &v : fn.values)
    if (v.kind == ValueKind::State && v.index < artifact.states.size() && isStaticState(artifact.states[v.index]))
      state.usesStaticState = true;
  return Status::OK();
}

const Artifact &Model::artifact() const { return impl_->artifact; }
const RuntimeOptions &Model::options() const { return impl_->options; }
Session &Model::defaultSession() { return *impl_->session; }

std::vector<KernelProfile> Model::profile() const {
  std::shared_lock<CallLock> lock(impl_->callMutex);  // profiled calls run alone
  std::vector<KernelProfile> out;
  for (const auto &[key, entry] : impl_->profile) {
    out.push_back(entry);
    out.back().entry = key.first;
    out.back().kernel = key.second;
  }
  std::sort(out.begin(), out.end(), [](const KernelProfile &a, const KernelProfile &b) { return a.millis > b.millis; });
  return out;
}

void Model::resetProfile() {
  std::lock_guard<CallLock> lock(impl_->callMutex);
  impl_->profile.clear();
}

MemoryPlanSummary Model::lastMemoryPlan(const std::string &entry) const {
  return impl_->session->lastMemoryPlan(entry);
}

Session::Session() : impl_(std::make_unique<Impl>()) {}
Session::~Session() = default;

Status Session::create(Model &model, std::unique_ptr<Session> &session) {
  try {
    std::unique_ptr<Session> s(new Session());
    s->impl_->model = model.impl_.get();
    s->impl_->runs.resize(model.impl_->entries.size());
    for (size_t i = 0; i < model.impl_->entries.size(); ++i) {
      const EntryState &e = model.impl_->entries[i];
      s->impl_->runs[i].data.assign(e.fn->values.size(), nullptr);
      s->impl_->runs[i].refs.assign(e.refs.size(), TensorRef());
    }
    const Artifact &a = model.impl_->artifact;
    s->impl_->states.resize(a.states.size());  // static ones on first need (allocateStaticStates)
    session = std::move(s);
    return Status::OK();
  } catch (const std::bad_alloc &) {
    return outOfMemory("out of memory while creating a session");
  }
}

Status Session::bindStates(const std::vector<int64_t> &dims) {
  std::lock_guard<std::mutex> busy(impl_->busy);  // not during a call of this session
  const Artifact &a = impl_->model->artifact;
  std::vector<Shape> shapes(a.states.size());
  double totalBytes = 0;
  for (size_t i = 0; i < a.states.size(); ++i) {
    const StateInfo &st = a.states[i];
    if (isStaticState(st)) continue;
    Shape shape = st.shape;
    size_t next = 0;
    for (int64_t &d : shape) {
      if (d != kDynamicDim) continue;
      if (next >= dims.size())
        return invalidArgument(cat("bindStates: state '", st.name, "' ", shapeStr(st.shape), " has more dynamic dims than the ",
                                   dims.size(), " given"));
      if (dims[next] < 1) return invalidArgument(cat("bindStates: dims must be >= 1, got ", dims[next]));
      d = dims[next++];
    }
    if (next != dims.size())
      return invalidArgument(cat("bindStates: state '", st.name, "' ", shapeStr(st.shape), " has ", next,
                                 " dynamic dims, ", dims.size(), " given"));
    int64_t numel;
    if (!checkedNumel(shape, int64_t(1) << 36, numel))
      return invalidArgument(cat("bindStates: state '", st.name, "' of shape ", shapeStr(shape), " is too large"));
    totalBytes += double(numel) * double(dtypeSize(st.dtype));
    shapes[i] = std::move(shape);
  }
  // Each cache alone may fit while all of them do not (the mappings succeed; touching them gets
  // the process killed): refuse the whole set up front.
  if (const uint64_t physical = physicalMemoryBytes(); physical && totalBytes > double(physical))
    return invalidArgument(cat("the session's state needs ", std::fixed, std::setprecision(1),
                               totalBytes / double(1 << 30), " GiB, more than this machine's ",
                               double(physical) / double(1 << 30), " GiB of memory"));
  try {
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (isStaticState(a.states[i])) continue;
      Tensor &t = impl_->states[i];
      bool fits = t.shape.size() == shapes[i].size();
      for (size_t d = 0; fits && d < shapes[i].size(); ++d) fits = t.shape[d] >= shapes[i][d];
      if (fits) continue;
      // Grow to the larger of the old and new size per dim, so batches alternating between more
      // rows and more positions do not re-allocate every time. 4 KiB pages mapped on first touch:
      // a cache is sized for the longest output and most runs touch a fraction of it (on 2 MiB
      // pages a greedy test_2016 run faulted in all 96 MB of K/V: 12-15 % of its time on a Zen 5
      // VM, against 2 % on 4 KiB pages).
      if (t.shape.size() == shapes[i].size())
        for (size_t d = 0; d < shapes[i].size(); ++d) shapes[i][d] = std::max(shapes[i][d], t.shape[d]);
      t = Tensor();  // free first
      t = Tensor::largeBuffer(a.states[i].dtype, shapes[i], Tensor::Pages::OnTouch);  // zero-filled
    }
  } catch (const std::bad_alloc &) {
    for (size_t i = 0; i < a.states.size(); ++i)
      if (!isStaticState(a.states[i])) impl_->states[i] = Tensor();
    impl_->dynamicBound = false;
    return outOfMemory("out of memory for the session's state");
  }
  impl_->dynamicBound = true;
  return Status::OK();
}

void Session::Impl::allocateStaticStates() {
  if (staticAllocated) return;
  const Artifact &a = model->artifact;
  for (size_t i = 0; i < a.states.size(); ++i)
    if (isStaticState(a.states[i])) states[i] = Tensor(a.states[i].dtype, a.states[i].shape);  // zeros
  staticAllocated = true;
}

void Session::Impl::zeroStaticStates() {
  const Artifact &a = model->artifact;
  for (size_t i = 0; i < a.states.size() && i < states.size(); ++i)
    if (isStaticState(a.states[i]) && states[i].rawData()) std::memset(states[i].rawData(), 0, states[i].nbytes());
}

const Tensor *Session::state(const std::string &name) const {
  std::lock_guard<std::mutex> busy(impl_->busy);  // not during a call of this session (it may allocate)
  const Artifact &a = impl_->model->artifact;
  for (size_t i = 0; i < a.states.size() && i < impl_->states.size(); ++i)
    if (a.states[i].name == name) {
      if (isStaticState(a.states[i])) {
        try {
          impl_->allocateStaticStates();
        } catch (const std::bad_alloc &) {
          return nullptr;
        }
      }
      return impl_->states[i].shape.empty() ? nullptr : &impl_->states[i];
    }
  return nullptr;
}

Tensor *Session::mutableState(const std::string &name) {
  return const_cast<Tensor *>(static_cast<const Session *>(this)->state(name));
}

int64_t Session::stateBytes() const {
  std::lock_guard<std::mutex> busy(impl_->busy);
  int64_t n = 0;
  for (const Tensor &t : impl_->states)
    if (t.rawData()) n += int64_t(t.nbytes());  // not yet allocated: nothing
  return n;
}

MemoryPlanSummary Session::lastMemoryPlan(const std::string &entry) const {
  std::lock_guard<std::mutex> busy(impl_->busy);
  EntryState *state = impl_->model->findEntry(entry);
  return state ? impl_->runs[impl_->model->entryIndex(*state)].lastPlan : MemoryPlanSummary();
}

bool Model::bf16RunsAsF32() const {
  bool any = false;
  for (const EntryFunction &fn : impl_->artifact.functions)
    for (const Node &node : fn.nodes)
      any = any || nodeLayout(node) == Layout::PackedBf16 ||
            ((node.op == "tfm.weight_grad" || node.op == "tfm.fused_attention") &&
             attrString(node, "precision") == "bf16");
  return any && (impl_->options.backend == KernelBackend::Reference || !gemm::cpuHasAvx512Bf16());
}

Model::Int8Sites Model::int8Sites() const {
  bool any = false;
  for (const EntryFunction &fn : impl_->artifact.functions)
    for (const Node &node : fn.nodes) any = any || nodeLayout(node) == Layout::PackedInt8;
  if (!any) return Int8Sites::None;
  if (impl_->options.backend == KernelBackend::Reference) return Int8Sites::InF32;
  switch (gemm::int8::int8Path()) {
  case gemm::int8::Int8Path::Vnni: return Int8Sites::Native;
  case gemm::int8::Int8Path::Portable: return Int8Sites::Portable;
  case gemm::int8::Int8Path::F32: break;
  }
  return Int8Sites::InF32;
}

std::string Model::kernelName(const std::string &entry, size_t nodeIndex) const {
  EntryState *state = impl_->findEntry(entry);
  if (!state || nodeIndex >= state->kernels.size()) return "";
  return state->kernels[nodeIndex]->name();
}

Status Model::prepare(const std::vector<std::string> &entries) {
  std::lock_guard<CallLock> lock(impl_->callMutex);  // as a run that re-derives an entry
  try {
    for (const std::string &name : entries) {
      EntryState *state = impl_->findEntry(name);
      if (!state) return notFound(cat("the model has no entry '", name, "'"));
      state->inUse = true;
      if (impl_->derivedStale(*state)) TFMRT_RETURN_IF_ERROR(impl_->evaluateWeightDerived(*state));
    }
  } catch (const std::bad_alloc &) {
    return outOfMemory("out of memory while preparing the model's entries");
  }
  return Status::OK();
}

EntryState *Model::Impl::findEntry(const std::string &name) {
  for (auto &e : entries)
    if (e.fn->name == name) return &e;
  return nullptr;
}

}  // namespace tfmrt
