// Hand-written data-movement kernels of the Dnnl backend: tfm.split_heads, tfm.merge_heads,
// tfm.slice_last. Each is a set of equal-length contiguous runs copied from one place to another;
// the runs are spread evenly over the threads (the reference kernels parallelise over B x H only,
// which leaves threads idle for small batches).
#include "kernels/fast_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "op_schema.h"

namespace tfmrt {
namespace fast {
namespace {

// Copies `runs` runs of `len` floats: run r goes from src + srcOf(r) to dst + dstOf(r).
template <typename SrcOf, typename DstOf>
void copyRuns(const float *src, float *dst, int64_t runs, int64_t len, const SrcOf &srcOf, const DstOf &dstOf) {
  if (runs == 0 || len == 0) return;
  const size_t bytes = size_t(len) * sizeof(float);
#pragma omp parallel for schedule(static) if (runs * len >= kParallelMinElements)
  for (int64_t r = 0; r < runs; ++r) std::memcpy(dst + dstOf(r), src + srcOf(r), bytes);
}

// [B, S, H*K] -> [B, H, S, K]; run (b, h, s) in output order so writes stream.
class SplitHeadsKernel final : public Kernel {
public:
  const char *name() const override { return "fast.split_heads"; }
  Status run(const KernelArgs &a) const override {
    const TensorRef &o = a.outputs[0];
    const int64_t B = o.dim(0), H = o.dim(1), S = o.dim(2), K = o.dim(3);
    copyRuns(a.inputs[0].as<float>(), o.as<float>(), B * H * S, K,
             [=](int64_t r) {
               const int64_t s = r % S, h = (r / S) % H, b = r / (S * H);
               return (b * S + s) * H * K + h * K;
             },
             [=](int64_t r) { return r * K; });
    return Status::OK();
  }
};

// [B, H, S, K] -> [B, S, H*K]; run (b, s, h) in output order.
class MergeHeadsKernel final : public Kernel {
public:
  const char *name() const override { return "fast.merge_heads"; }
  Status run(const KernelArgs &a) const override {
    const TensorRef &i = a.inputs[0];
    const int64_t B = i.dim(0), H = i.dim(1), S = i.dim(2), K = i.dim(3);
    copyRuns(i.as<float>(), a.outputs[0].as<float>(), B * S * H, K,
             [=](int64_t r) {
               const int64_t h = r % H, s = (r / H) % S, b = r / (H * S);
               return ((b * H + h) * S + s) * K;
             },
             [=](int64_t r) { return r * K; });
    return Status::OK();
  }
};

class SliceLastKernel final : public Kernel {
public:
  const char *name() const override { return "fast.slice_last"; }
  Status prepare(const KernelPrepareInfo &info) override {
    offset_ = attrInt(*info.node, "offset");
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const int64_t w = a.inputs[0].dim(-1), size = a.outputs[0].dim(-1), offset = offset_;
    copyRuns(a.inputs[0].as<float>(), a.outputs[0].as<float>(), rowsOf(a.inputs[0]), size,
             [=](int64_t r) { return r * w + offset; }, [=](int64_t r) { return r * size; });
    return Status::OK();
  }

private:
  int64_t offset_ = 0;
};

}  // namespace
}  // namespace fast

void registerFastCopy(KernelRegistry &r) {
  r.add(dnnlKey("tfm.split_heads"), makeKernel<fast::SplitHeadsKernel>);
  r.add(dnnlKey("tfm.merge_heads"), makeKernel<fast::MergeHeadsKernel>);
  r.add(dnnlKey("tfm.slice_last"), makeKernel<fast::SliceLastKernel>);
}

}  // namespace tfmrt
