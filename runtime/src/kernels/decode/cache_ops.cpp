// Fast tfm.cache_write and tfm.cache_reorder (f32 or bf16 caches) and tfm.to_bf16 (see cache_ops.h). Why threads for a copy: each
// row's destination is a cold 1 KB run at its own position, 128 KB from the next row's (small
// spec), so one thread waits on one row's misses at a time. On test_2016 greedy (128 rows, a
// 2-core Zen 3, 3 alternating rounds of --profile) the serial cache_write took 0.30-1.54 ms per
// decoder call and this one 0.19-0.20 ms.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/decode/cache_ops.h"
#include "kernels/decode/decode_common.h"
#include "kernels/kernel_util.h"

namespace tfmrt {
namespace {

// Rows below this many floats copied in all run on one thread (the fork costs more).
constexpr int64_t kParallelFloats = 8192;

class FastCacheWrite final : public Kernel {
public:
  const char *name() const override { return "fast.cache_write"; }
  Status prepare(const KernelPrepareInfo &info) override {
    offset_ = attrInt(*info.node, "update_offset");
    avx512Bf16_ = gemm::cpuHasAvx512Bf16();
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override { return decode::writeCacheRows(a, offset_, kParallelFloats, avx512Bf16_); }

private:
  int64_t offset_ = 0;
  bool avx512Bf16_ = false;
};

// tfm.to_bf16 (encode's cross K/V under tfm-lower-kv-precision): gemm::toBf16 (the bf16 GEMMs'
// operand conversion: AVX512-BF16, chunks over the threads) where the CPU has it, else per element.
class FastToBf16 final : public Kernel {
public:
  const char *name() const override { return avx512Bf16_ ? "fast.to_bf16_avx512bf16" : "fast.to_bf16"; }
  Status prepare(const KernelPrepareInfo &) override {
    avx512Bf16_ = gemm::cpuHasAvx512Bf16();
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const int64_t n = a.inputs[0].numel();
    const float *x = a.inputs[0].as<float>();
    uint16_t *y = a.outputs[0].as<uint16_t>();
    if (avx512Bf16_) gemm::toBf16(x, n, y);
    else decode::rowToBf16(x, n, y, false);
    return Status::OK();
  }

private:
  bool avx512Bf16_ = false;
};

class FastCacheReorder final : public Kernel {
public:
  const char *name() const override { return "fast.cache_reorder"; }
  size_t scratchBytes(const std::vector<const std::vector<int64_t> *> &in, int) const override {
    return decode::ReorderPlan::scratchBytes(in);
  }
  Status run(const KernelArgs &a) const override {
    // Per calling thread (sessions on several threads may run this kernel at once), kept so that
    // its vectors are not reallocated per step; the threads below read this thread's plan.
    thread_local decode::ReorderPlan planOfThread;
    decode::ReorderPlan &plan = planOfThread;
    TFMRT_RETURN_IF_ERROR(plan.begin(a));
    const int64_t saved = int64_t(plan.saved.size()), moved = int64_t(plan.moved.size());
    // Per block of positions: every overwritten source saved, then (after the barrier) every
    // moved row copied; rows are independent within each phase.
#pragma omp parallel if (moved * plan.longest * plan.D >= kParallelFloats)
    for (int64_t p0 = 0; p0 < plan.longest; p0 += decode::ReorderPlan::kBlock) {
      const int64_t n = std::min(decode::ReorderPlan::kBlock, plan.longest - p0);
#pragma omp for schedule(static)
      for (int64_t i = 0; i < saved; ++i) plan.save(size_t(i), p0, n);
#pragma omp for schedule(static)
      for (int64_t i = 0; i < moved; ++i) plan.copy(size_t(i), p0, n);
    }
    return Status::OK();
  }
};

KernelKey fastKey(const char *op, DType dtype = DType::F32) { return {op, dtype, Layout::Plain, KernelBackend::Dnnl}; }

}  // namespace

void registerFastCacheOps(KernelRegistry &r) {
  for (DType cache : {DType::F32, DType::BF16}) {  // the key's dtype is the cache's
    r.add(fastKey("tfm.cache_write", cache), makeKernel<FastCacheWrite>);
    r.add(fastKey("tfm.cache_reorder", cache), makeKernel<FastCacheReorder>);
  }
  r.add(fastKey("tfm.to_bf16"), makeKernel<FastToBf16>);
}

}  // namespace tfmrt
