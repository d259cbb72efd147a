// The AVX-512 row body of the fast tfm.log_softmax (log_softmax_avx512.cpp).
#pragma once

#include <cstdint>

namespace tfmrt::fast {

// y[0, n) = x - log(sum(exp(x))), n > 0; enter only after attention::cpuHasAvx512().
void logSoftmaxRowAvx512(const float *x, int64_t n, float *y);

}  // namespace tfmrt::fast
