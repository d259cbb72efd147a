// The plain weight-gradient loops the AVX2 body is tested against (weight_grad.h).
#include "kernels/gemm/weight_grad.h"

#include <cmath>

namespace tfmrt::gemm {

void weightGradReference(const float *dy, const float *x, int64_t R, int64_t N, int64_t K, float *dw) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      float acc = 0.0f;
      for (int64_t r = 0; r < R; ++r) acc = std::fma(dy[r * N + n], x[r * K + k], acc);
      dw[n * K + k] = acc;
    }
}

}  // namespace tfmrt::gemm
