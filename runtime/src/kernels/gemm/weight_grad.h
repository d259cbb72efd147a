// The weight gradient of a linear layer, dW [N, K] = dy^T x (dy [R, N], x [R, K], R = the
// tokens of a batch): a long reduction into a small result. oneDNN 2.6's gemm:jit (dy read
// through the transposed tag) ran the small spec's shapes at 60-112 GFLOP/s on a 2-core Zen 3 at
// R = 3000, a third of a training step; this AVX2 body keeps a 6 x 16 block of dW in registers
// over a chunk of rows of x and dy (12 fused multiply-adds per row for 2 vector loads of x and
// 6 broadcasts of dy).
//
// Each element is one fused multiply-add chain in r order (chunks store and reload the partial
// sums, which is exact), so the result is independent of threads and chunking and equal, bit for
// bit, to weightGradReference.
#pragma once

#include <cstdint>

namespace tfmrt::gemm {

// Rows [n0, n1) of dW. Enter only after attention::cpuHasAvx2Fma(). R >= 1.
void weightGradRowsAvx2(const float *dy, const float *x, int64_t R, int64_t N, int64_t K, int64_t n0, int64_t n1,
                        float *dw);
// The plain loops it is tested against: dw[n][k] = fma chain over r of dy[r][n] * x[r][k].
void weightGradReference(const float *dy, const float *x, int64_t R, int64_t N, int64_t K, float *dw);

}  // namespace tfmrt::gemm
