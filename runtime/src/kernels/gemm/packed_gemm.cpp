// Packing and the reference body of the packed small-M GEMM (packed_gemm.h).
#include "kernels/gemm/packed_gemm.h"

#include <algorithm>

namespace tfmrt::gemm {

void packPanels(const float *w, int64_t k, int64_t n, bool transposed, float *packed) {
  const int64_t panels = panelCount(n);
  for (int64_t p = 0; p < panels; ++p) {
    float *out = packed + p * k * kPanelCols;
    const int64_t c0 = p * kPanelCols, cols = std::min(kPanelCols, n - c0);
    if (transposed) {
      // 64 x 64 tiles: 64 contiguous reads of each weight row, written 64 floats apart within a
      // 16 KB tile (in L1). Element-by-element over the whole panel was ~0.25 GB/s at 32000 x 512.
      std::fill(out, out + k * kPanelCols, 0.0f);
      for (int64_t k0 = 0; k0 < k; k0 += 64) {
        const int64_t k1 = std::min(k, k0 + 64);
        for (int64_t j = 0; j < cols; ++j) {
          const float *row = w + (c0 + j) * k;
          for (int64_t kk = k0; kk < k1; ++kk) out[kk * kPanelCols + j] = row[kk];
        }
      }
    } else {
      for (int64_t kk = 0; kk < k; ++kk) {
        std::copy(w + kk * n + c0, w + kk * n + c0 + cols, out + kk * kPanelCols);
        std::fill(out + kk * kPanelCols + cols, out + (kk + 1) * kPanelCols, 0.0f);
      }
    }
  }
}

void gemmPanelsReference(const float *x, int64_t m, int64_t k, const float *packed, int64_t n, int64_t p0, int64_t p1,
                         const Epilogue &e, float *y) {
  for (int64_t p = p0; p < p1; ++p) {
    const float *panel = packed + p * k * kPanelCols;
    const int64_t c0 = p * kPanelCols, cols = std::min(kPanelCols, n - c0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        double acc = 0;
        for (int64_t kk = 0; kk < k; ++kk) acc += double(x[i * k + kk]) * double(panel[kk * kPanelCols + j]);
        float v = float(acc) + (e.bias ? e.bias[c0 + j] : 0.0f);
        if (e.relu) v = std::max(v, 0.0f);
        if (e.residual) v += e.residual[i * n + c0 + j];
        y[i * n + c0 + j] = v;
      }
  }
}

}  // namespace tfmrt::gemm
