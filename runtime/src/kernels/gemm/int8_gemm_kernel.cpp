// tfm.linear and tfm.matmul with weight_layout "packed_int8" (tfmc compile --precision=int8) on the
// fast backend: the weight quantized per output column once per weights version (prepareWeights),
// x per row per call, int32 dot products (packed_gemm_int8.h), the f32 epilogue: the AVX512-VNNI
// body (on AMX tiles where the CPU has AMX-INT8 and K is a multiple of 64), or the plain loops with TFMC_INT8_ISA=portable (the same bits). Every row count takes the
// same path and a row's result depends on that row only, so results do not depend on the batch or
// the threads. Without VNNI the sites run the f32 packed GEMM instead (gemm::int8::int8Path), as
// bf16 sites do without AVX512-BF16; the reference backend computes them in f32 too (the oracle
// the int8 results are compared to).
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "format.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/log_softmax.h"
#include "kernels/fast_kernels.h"
#include "kernels/gemm/packed_gemm_int8.h"
#include "kernels/kernel_util.h"
#include "op_schema.h"
#include "tfmrt/tensor.h"

namespace tfmrt {
namespace {

namespace q8 = gemm::int8;

class Int8GemmKernel final : public Kernel {
public:
  explicit Int8GemmKernel(bool linear) : linear_(linear), vnni_(q8::int8Path() == q8::Int8Path::Vnni) {}

  const char *name() const override {
    if (vnni_) return linear_ ? "fast.linear.packed_int8" : "fast.matmul.packed_int8";
    return linear_ ? "portable.linear.packed_int8" : "portable.matmul.packed_int8";
  }

  Status prepare(const KernelPrepareInfo &info) override {
    // An unknown value (PORTABLE, amx, ...) once ran the default path without a word.
    if (q8::int8IsaOverride() == q8::Int8IsaOverride::Unknown)
      return invalidArgument(cat("TFMC_INT8_ISA must be vnni, portable or f32 (or unset), got '",
                                 std::getenv("TFMC_INT8_ISA"), "'"));
    const Node &node = *info.node;
    transposeB_ = linear_ || attrInt(node, "transpose_b") != 0;
    logSoftmax_ = !linear_ && attrInt(node, "log_softmax") != 0;
    if (linear_) {
      const std::string act = attrString(node, "activation");
      relu_ = act == "relu";
      gelu_ = act == "gelu";
      hasResidual_ = info.inputs.size() == 4;
    }
    const std::vector<int64_t> &b = info.inputs[1]->shape;
    const int64_t k = transposeB_ ? b[1] : b[0];
    if (k > q8::kMaxK)
      return invalidArgument(cat("weight_layout 'packed_int8' sums at most ", q8::kMaxK,
                                 " products exactly in int32, but the contraction has ", k));
    amx_ = vnni_ && q8::amxInt8Fits(k) && q8::cpuHasAmxInt8();
    return Status::OK();
  }

  Status prepareWeights(const KernelArgs &a) override {
    std::lock_guard<std::mutex> lock(packMutex_);
    if (a.inputs[1].data) pack(a.inputs[1], a.weightsVersion);
    return Status::OK();
  }

  Status run(const KernelArgs &a) const override {
    const TensorRef &A = a.inputs[0], &B = a.inputs[1], &C = a.outputs[0];
    const int64_t m = rowsOf(C), k = A.dim(-1), n = C.dim(-1);
    if (m == 0 || n == 0) return Status::OK();
    {
      std::lock_guard<std::mutex> lock(packMutex_);
      if (packedVersion_ != a.weightsVersion || packedFrom_ != B.data) pack(B, a.weightsVersion);  // weights swapped without prepareWeights
    }
    const float *x = A.as<float>();
    float *y = C.as<float>();
    const int64_t stride = q8::rowBytes(k);
    // x quantized and its row scales, per calling thread (grown once; sessions may run this
    // kernel at once). Local references: the parallel loops below read this thread's vectors.
    thread_local std::vector<uint8_t> xqOfThread;
    thread_local std::vector<float> sxOfThread, residualCopyOfThread;
    std::vector<uint8_t> &xq = xqOfThread;
    std::vector<float> &sx = sxOfThread, &residualCopy = residualCopyOfThread;
    xq.resize(size_t(m * stride));
    sx.resize(size_t(m));
    fast::parallelSpans(m, std::max<int64_t>(1, kParallelMinElements / std::max<int64_t>(k, 1)), [&](int64_t r, int64_t e) {
      if (vnni_) q8::quantizeRowsAvx512(x + r * k, e - r, k, xq.data() + r * stride, sx.data() + r);
      else q8::quantizeRowsReference(x + r * k, e - r, k, xq.data() + r * stride, sx.data() + r);
    });
    const float *residual = hasResidual_ ? a.inputs[3].as<float>() : nullptr;
    // With gelu the residual is added after the product is written to y, so a residual that is y
    // itself (never so today: results do not share their operands' memory) is copied first.
    if (gelu_ && residual == y) {
      residualCopy.assign(residual, residual + m * n);
      residual = residualCopy.data();
    }
    gemm::Epilogue e;
    e.bias = linear_ ? a.inputs[2].as<float>() : nullptr;
    e.relu = relu_;
    e.residual = gelu_ ? nullptr : residual;  // gelu comes before the residual: both added below
    const q8::PackedWeight w{panels_.data<int8_t>(), scales_.data(), offsets_.data()};
    fast::parallelPanels(gemm::panelCount(n), m * n * k, [&](int64_t p0, int64_t p1) {
      if (amx_) q8::gemmAmxInt8(xq.data(), sx.data(), m, k, w, n, p0, p1, e, y);
      else if (vnni_) q8::gemmAvx512Vnni(xq.data(), sx.data(), m, k, w, n, p0, p1, e, y);
      else q8::gemmReference(xq.data(), sx.data(), m, k, w, n, p0, p1, e, y);
    });
    if (gelu_) {  // gelu, then the residual (the order of the f32 kernels' post-ops)
      fast::parallelSpans(m * n, kParallelMinElements, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) y[i] = fast::geluErf(y[i]) + (residual ? residual[i] : 0.0f);
      });
    }
    if (logSoftmax_) fast::logSoftmaxRows(y, m, n, y);
    return Status::OK();
  }

private:
  // Under packMutex_.
  void pack(const TensorRef &b, uint64_t version) const {
    const int64_t k = transposeB_ ? b.dim(1) : b.dim(0), n = transposeB_ ? b.dim(0) : b.dim(1);
    // packWeight writes every byte of all three (zeros past K and N).
    if (panels_.numel() != q8::packedPanelBytes(k, n)) panels_ = Tensor::uninitialized(DType::Bool, {q8::packedPanelBytes(k, n)});
    scales_.resize(size_t(q8::packedColumns(n)));
    offsets_.resize(size_t(q8::packedColumns(n)));
    q8::packWeight(b.as<float>(), k, n, transposeB_, panels_.data<int8_t>(), scales_.data(), offsets_.data());
    packedVersion_ = version;
    packedFrom_ = b.data;
  }

  const bool linear_, vnni_;
  bool amx_ = false;  // the VNNI body's work on AMX tiles (q8::cpuHasAmxInt8, amxInt8Fits): the same bits
  bool transposeB_ = false, logSoftmax_ = false, relu_ = false, gelu_ = false, hasResidual_ = false;
  // The quantized weight (a Tensor's storage: 64-byte aligned for the vector loads), and which
  // weight and version it was made from: made once per weights version under packMutex_ (the
  // first calls of a version may come from several sessions at once), then only read.
  mutable std::mutex packMutex_;
  mutable Tensor panels_;
  mutable std::vector<float> scales_;
  mutable std::vector<int32_t> offsets_;
  mutable uint64_t packedVersion_ = ~uint64_t(0);
  mutable const void *packedFrom_ = nullptr;
};

KernelKey int8Key(const char *op) { return {op, DType::F32, Layout::PackedInt8, KernelBackend::Dnnl}; }

// Sites that run the f32 packed GEMM (int8Path() F32); an unknown TFMC_INT8_ISA gets the int8
// kernel, whose prepare refuses it.
bool runsInF32() {
  return q8::int8Path() == q8::Int8Path::F32 && q8::int8IsaOverride() != q8::Int8IsaOverride::Unknown;
}

}  // namespace

void registerFastInt8Gemm(KernelRegistry &r) {
  r.add(int8Key("tfm.linear"), +[]() -> std::unique_ptr<Kernel> {
    if (runsInF32()) return makePackedGemmF32(true);
    return std::make_unique<Int8GemmKernel>(true);
  });
  r.add(int8Key("tfm.matmul"), +[]() -> std::unique_ptr<Kernel> {
    if (runsInF32()) return makePackedGemmF32(false);
    return std::make_unique<Int8GemmKernel>(false);
  });
}

}  // namespace tfmrt
