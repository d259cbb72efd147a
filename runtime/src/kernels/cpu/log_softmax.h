// The row bodies of the fast tfm.log_softmax: AVX-512 (log_softmax_avx512.cpp) and AVX2 + FMA
// (log_softmax_avx2.cpp), and the rows driver the kernel and tfm.matmul {log_softmax} share.
#pragma once

#include <cstdint>

namespace tfmrt::fast {

// y[0, n) = x - log(sum(exp(x))), n > 0; enter only after attention::cpuHasAvx512().
void logSoftmaxRowAvx512(const float *x, int64_t n, float *y);
// The same on 8 lanes; enter only after attention::cpuHasAvx2Fma().
void logSoftmaxRowAvx2(const float *x, int64_t n, float *y);
// rows x n: y = log_softmax(x) per row, rows in parallel, the best body this CPU has. y may be x
// (each row is read before any of it is written).
void logSoftmaxRows(const float *x, int64_t rows, int64_t n, float *y);

}  // namespace tfmrt::fast
