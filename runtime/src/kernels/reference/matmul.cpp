// tfm.matmul and tfm.batch_matmul: the textbook loops (row of A times B, accumulated in double
// so the oracle is more accurate than the kernels it checks).
#include "kernels/kernel_util.h"
#include "kernels/reference/reference_kernels.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

// C[i] = A[i] * B[i] for i < batch, with A[i] [M, K] or (transposeA) [K, M] and B[i] [K, N] or
// (transposeB) [N, K].
void gemm(const float *A, const float *B, float *C, int64_t batch, int64_t M, int64_t K, int64_t N,
          bool transposeB, bool transposeA = false) {
#pragma omp parallel for collapse(2) if (batch * M * N * K >= kParallelMinElements)
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t m = 0; m < M; ++m) {
      const float *a = A + i * M * K;
      const float *b = B + i * K * N;
      float *c = C + (i * M + m) * N;
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0.0;
        for (int64_t k = 0; k < K; ++k)
          acc += double(transposeA ? a[k * M + m] : a[m * K + k]) * double(transposeB ? b[n * K + k] : b[k * N + n]);
        c[n] = float(acc);
      }
    }
}

// An operand as f32: itself, or (bf16) widened into `storage`. bf16 products are exact in f32 and
// accumulated in double, like f32 ones.
const float *asF32(const TensorRef &t, std::vector<float> &storage) {
  if (t.dtype != DType::BF16) return t.as<float>();
  storage.resize(size_t(t.numel()));
  const uint16_t *h = t.as<uint16_t>();
  for (size_t i = 0; i < storage.size(); ++i) storage[i] = bf16ToFloat(h[i]);
  return storage.data();
}

class MatmulKernel final : public Kernel {
public:
  const char *name() const override { return "reference.matmul"; }
  Status prepare(const KernelPrepareInfo &info) override {
    transposeB_ = attrInt(*info.node, "transpose_b") != 0;
    logSoftmax_ = attrInt(*info.node, "log_softmax") != 0;
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const TensorRef &A = a.inputs[0], &B = a.inputs[1];
    const int64_t k = A.dim(-1), n = transposeB_ ? B.dim(0) : B.dim(1);
    // Rows from the result: rowsOf(A) is 0 when K = 0, yet the [M, N] result must be zeros.
    std::vector<float> a32, b32;
    float *y = a.outputs[0].as<float>();
    const int64_t m = rowsOf(a.outputs[0]);
    gemm(asF32(A, a32), asF32(B, b32), y, 1, m, k, n, transposeB_);
    if (logSoftmax_) logSoftmaxRowsReference(y, m, n, y);
    return Status::OK();
  }

private:
  bool transposeB_ = false, logSoftmax_ = false;
};

class BatchMatmulKernel final : public Kernel {
public:
  const char *name() const override { return "reference.batch_matmul"; }
  Status prepare(const KernelPrepareInfo &info) override {
    transposeB_ = attrInt(*info.node, "transpose_b") != 0;
    transposeA_ = attrInt(*info.node, "transpose_a") != 0;
    return Status::OK();
  }
  Status run(const KernelArgs &a) const override {
    const TensorRef &A = a.inputs[0], &B = a.inputs[1];
    const int64_t m = transposeA_ ? A.dim(-1) : A.dim(-2), k = transposeA_ ? A.dim(-2) : A.dim(-1);
    const int64_t n = transposeB_ ? B.dim(-2) : B.dim(-1);
    int64_t batch = 1;
    for (int i = 0; i + 2 < A.rank(); ++i) batch *= A.dim(i);
    std::vector<float> a32, b32;
    gemm(asF32(A, a32), asF32(B, b32), a.outputs[0].as<float>(), batch, m, k, n, transposeB_, transposeA_);
    return Status::OK();
  }

private:
  bool transposeB_ = false, transposeA_ = false;
};

}  // namespace

void registerReferenceMatmul(KernelRegistry &r) {
  // The oracle reads the row-major weight whatever the layout hint says.
  r.add(referenceKey("tfm.matmul"), makeKernel<MatmulKernel>);
  r.add(referenceKey("tfm.matmul", DType::F32, Layout::Packed), makeKernel<MatmulKernel>);
  r.add(referenceKey("tfm.matmul", DType::F32, Layout::PackedBf16), makeKernel<MatmulKernel>);
  r.add(referenceKey("tfm.matmul", DType::F32, Layout::PackedInt8), makeKernel<MatmulKernel>);
  r.add(referenceKey("tfm.batch_matmul"), makeKernel<BatchMatmulKernel>);
  // bf16 operands (f32 accumulation and result); the fast backend falls back to these until it
  // has bf16 GEMMs of its own.
  r.add(referenceKey("tfm.matmul", DType::BF16), makeKernel<MatmulKernel>);
  r.add(referenceKey("tfm.matmul", DType::BF16, Layout::Packed), makeKernel<MatmulKernel>);
  r.add(referenceKey("tfm.batch_matmul", DType::BF16), makeKernel<BatchMatmulKernel>);
}

}  // namespace tfmrt
