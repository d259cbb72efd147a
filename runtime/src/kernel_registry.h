// Kernels and the registry that maps (op, dtype, layout, backend) to them.
//
// A Kernel is created per node when a Model is loaded: prepare() runs once then (validate static
// facts, create oneDNN primitives), run() on every call with concrete tensors whose shapes have
// already been checked by shape inference. Kernels never see a shape inconsistent with their node.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "tfmrt/artifact.h"
#include "tfmrt/runtime.h"
#include "tfmrt/status.h"

namespace tfmrt {

class Device;  // device.h; null for the reference backend

// How a kernel may store its constant GEMM weight, from the node's `weight_layout` attribute
// (Plain for ops without one). Plain kernels read the row-major weight in place every call; Packed
// kernels reorder it once per weights version into the GEMM's preferred layout. Inputs and
// outputs are always row-major.
// PackedBf16: packed with bf16 elements; the kernel rounds the other operand to bf16 and
// accumulates in f32 (f32 on CPUs without AVX512-BF16).
// PackedInt8: quantized to int8 per output column; the kernel quantizes the other operand per row
// and accumulates in int32 (kernels/gemm/packed_gemm_int8.h).
enum class Layout : uint8_t { Plain = 0, Packed = 1, PackedBf16 = 2, PackedInt8 = 3 };
const char *layoutName(Layout layout);

// A tensor as a kernel sees it: a view into runtime-owned memory.
struct TensorRef {
  DType dtype = DType::F32;
  const std::vector<int64_t> *shape = nullptr;
  void *data = nullptr;

  int rank() const { return int(shape->size()); }
  int64_t dim(int i) const { return (*shape)[size_t(i < 0 ? i + rank() : i)]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : *shape) n *= d;
    return n;
  }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

struct KernelArgs {
  const TensorRef *inputs = nullptr;
  size_t numInputs = 0;
  const TensorRef *outputs = nullptr;
  size_t numOutputs = 0;
  // Changes whenever weights are (re)set: kernels that cache transformed weights (packed matmul
  // operands) re-derive them when it differs from what they saw last.
  uint64_t weightsVersion = 0;
  // Scratch memory for this call, 64-byte aligned, at least what scratchBytes() asked for at
  // these shapes (shared by all nodes of the entry: contents do not survive the call). Null for
  // nodes evaluated when weights are set (KernelPrepareInfo::knownBeforeRun operands only).
  void *scratch = nullptr;
  size_t scratchBytes = 0;
};

struct KernelPrepareInfo {
  const Node *node = nullptr;
  std::vector<const ValueInfo *> inputs;   // declared operand infos (kinds, dtypes, shapes)
  std::vector<const ValueInfo *> outputs;
  // Per operand: its value is known before run() -- a parameter, a constant, or the result of a
  // node evaluated when weights are set (all of whose operands are known). Such operands have
  // static shapes and change only when weightsVersion does.
  std::vector<bool> knownBeforeRun;
  Layout layout = Layout::Plain;
  Device *device = nullptr;
  bool fewRowsGemm = true;  // RuntimeOptions::few_rows_gemm
  bool inferenceEntry = true;  // no gradient, accumulation or optimizer op: weights fixed between calls
  bool fastWeightGrad = true;  // RuntimeOptions::fast_weight_grad
};

class Kernel {
public:
  virtual ~Kernel() = default;
  virtual const char *name() const = 0;  // "reference.matmul", "dnnl.matmul", ...
  virtual Status prepare(const KernelPrepareInfo &info) { return Status::OK(); }
  // Called whenever weights are set, after the load-time nodes were evaluated: operands known
  // before run() are bound (data + static shape), the others have null data and their declared
  // shapes, as do the outputs. Kernels that cache derived weights (packed GEMM operands) build
  // them here so run() does not.
  virtual Status prepareWeights(const KernelArgs &args) { return Status::OK(); }
  // Scratch run() needs beyond its operands at these concrete operand shapes with `threads`
  // OpenMP threads; called after prepare() when a shape plan is built. The Model allocates the
  // largest such need once per plan, next to the activation arena, and counts it in the plan.
  virtual size_t scratchBytes(const std::vector<const std::vector<int64_t> *> &inputShapes, int threads) const {
    return 0;
  }
  // Errors carry only the detail; the Model prefixes entry and node. Const: sessions on several
  // threads run one kernel at once, so a call keeps its working memory in args.scratch or in
  // per-thread buffers, and a weight-derived copy made on a first call is made under a lock.
  virtual Status run(const KernelArgs &args) const = 0;
};

using KernelFactory = std::unique_ptr<Kernel> (*)();

// `dtype` is the dtype of the node's first operand.
struct KernelKey {
  std::string op;
  DType dtype = DType::F32;
  Layout layout = Layout::Plain;
  KernelBackend backend = KernelBackend::Reference;
  bool operator<(const KernelKey &o) const {
    return std::tie(op, dtype, layout, backend) < std::tie(o.op, o.dtype, o.layout, o.backend);
  }
};

class KernelRegistry {
public:
  // Every built-in kernel (reference + oneDNN/fast), built on first use.
  static const KernelRegistry &builtin();

  void add(const KernelKey &key, KernelFactory factory);
  // Exact match or null.
  KernelFactory find(const KernelKey &key) const;
  // The kernel a Model uses: for Dnnl, the Dnnl kernel if registered, else the reference one.
  // Null if the op has no kernel at all.
  std::unique_ptr<Kernel> create(const std::string &op, DType dtype, Layout layout, KernelBackend backend) const;
  std::vector<KernelKey> keys() const;

private:
  std::map<KernelKey, KernelFactory> kernels_;
};

// Registration hooks, one per kernel family (kernels/reference/register.cpp, kernels/fast_register.cpp).
void registerReferenceKernels(KernelRegistry &registry);
void registerDnnlKernels(KernelRegistry &registry);

}  // namespace tfmrt
