// tfm.softmax on oneDNN over the last axis, viewed as [rows, n].
//
// oneDNN softmax has no run-time dims, so primitives are created lazily per distinct (rows, n) and
// kept in a small LRU cache: a shape already seen never re-creates its primitive (creation costs
// ~0.3 ms). The cache is shared by the sessions running the kernel (under a lock); the memory
// objects are made per call, and the primitive's scratchpad is the plan's scratch (scratchBytes
// creates the primitive of the shape it is asked about). oneDNN turns an all -inf row (every key masked) into NaN; our semantics require zeros,
// so such rows are rewritten after the primitive runs. The check costs one compare per row unless
// the row's first element is -inf.
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "kernels/onednn/onednn_util.h"
#include "kernels/kernel_util.h"

namespace tfmrt {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;
constexpr size_t kMaxCachedShapes = 32;

struct SoftmaxPlan {
  int64_t rows = 0, n = 0;
  uint64_t lastUse = 0;
  dnnl::softmax_forward prim;
  memory::desc md, scratchpad;  // the scratchpad is user-managed (see CpuDevice)
};

class DnnlSoftmaxKernel final : public Kernel {
public:
  const char *name() const override { return "dnnl.softmax"; }

  Status prepare(const KernelPrepareInfo &info) override {
    ctx_ = cpuDevice(info.device);
    if (!ctx_) return internalError("dnnl.softmax needs the CPU device");
    return Status::OK();
  }

  size_t scratchBytes(const std::vector<const std::vector<int64_t> *> &in, int) const override {
    const std::vector<int64_t> &shape = *in[0];
    if (shape.empty()) return 0;
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
    if (rows == 0 || shape.back() == 0) return 0;
    try {
      return planFor(rows, shape.back())->scratchpad.get_size();
    } catch (const dnnl::error &) {
      return 0;  // run() reports it
    }
  }

  Status run(const KernelArgs &a) const override {
    const TensorRef &X = a.inputs[0], &Y = a.outputs[0];
    const int64_t n = X.dim(-1), rows = rowsOf(X);
    if (rows == 0 || n == 0) return Status::OK();
    try {
      std::shared_ptr<SoftmaxPlan> plan = planFor(rows, n);
      if (plan->scratchpad.get_size() > a.scratchBytes)
        return internalError(cat("softmax: scratch of ", a.scratchBytes, " bytes, the primitive needs ",
                                 plan->scratchpad.get_size()));
      memory src(plan->md, ctx_->engine, X.data), dst(plan->md, ctx_->engine, Y.data);
      dnnlRun(*ctx_, plan->prim, {{DNNL_ARG_SRC, src.get()}, {DNNL_ARG_DST, dst.get()}}, plan->scratchpad, a.scratch);
    } catch (const dnnl::error &e) {
      return dnnlError("softmax", e);
    }
    zeroFullyMaskedRows(X.as<float>(), Y.as<float>(), rows, n);
    return Status::OK();
  }

private:
  // The cached plan of this shape, made if new. Throws dnnl::error.
  std::shared_ptr<SoftmaxPlan> planFor(int64_t rows, int64_t n) const {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    std::shared_ptr<SoftmaxPlan> plan = find(rows, n);
    if (!plan) plan = create(rows, n);
    plan->lastUse = ++clock_;
    return plan;
  }

  // Under cacheMutex_.
  std::shared_ptr<SoftmaxPlan> find(int64_t rows, int64_t n) const {
    for (auto &p : plans_)
      if (p->rows == rows && p->n == n) return p;
    return nullptr;
  }

  // Under cacheMutex_. An evicted plan lives on while a call still holds it.
  std::shared_ptr<SoftmaxPlan> create(int64_t rows, int64_t n) const {
    if (plans_.size() >= kMaxCachedShapes) {
      size_t oldest = 0;
      for (size_t i = 1; i < plans_.size(); ++i)
        if (plans_[i]->lastUse < plans_[oldest]->lastUse) oldest = i;
      plans_.erase(plans_.begin() + std::ptrdiff_t(oldest));
    }
    auto p = std::make_shared<SoftmaxPlan>();
    p->rows = rows;
    p->n = n;
    p->md = memory::desc({rows, n}, kF32, tag::ab);
    auto pd = dnnl::softmax_forward::primitive_desc(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, p->md, 1), dnnlUserScratchpad(), ctx_->engine);
    p->prim = dnnl::softmax_forward(pd);
    p->scratchpad = pd.scratchpad_desc();
    plans_.push_back(p);
    return p;
  }

  static void zeroFullyMaskedRows(const float *x, float *y, int64_t rows, int64_t n) {
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x + r * n;
      if (xr[0] != ninf) continue;
      bool all = true;
      for (int64_t j = 1; j < n && all; ++j) all = xr[j] == ninf;
      if (all) std::memset(y + r * n, 0, size_t(n) * sizeof(float));
    }
  }

  CpuDevice *ctx_ = nullptr;
  mutable std::mutex cacheMutex_;
  mutable std::vector<std::shared_ptr<SoftmaxPlan>> plans_;
  mutable uint64_t clock_ = 0;
};

}  // namespace

void registerDnnlSoftmax(KernelRegistry &r) { r.add(dnnlKey("tfm.softmax"), makeKernel<DnnlSoftmaxKernel>); }

}  // namespace tfmrt
