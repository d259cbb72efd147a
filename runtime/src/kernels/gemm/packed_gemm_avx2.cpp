// AVX2 + FMA body of the packed small-M GEMM (packed_gemm.h), for CPUs without AVX-512: panels
// of 16 columns (kAvx2PanelCols, packed for this body), 6 x 16 output blocks (12 ymm
// accumulators, 2 panel vectors, 1 broadcast: 15 of the 16 registers). Each output element is one
// fused multiply-add chain in kk order, as in the AVX-512 body, so both give the same bits.
// oneDNN 2.6's run-time-M gemm (gemm:jit, avx2) ran decode_step's products at ~75 GFLOP/s on a
// 2-core Zen 3.
//
// Compiled with -mavx2 -mfma and entered only after attention::cpuHasAvx2Fma(); no C++ library
// header, no inline function of a shared header (see packed_gemm_avx512.cpp).
#include <immintrin.h>

#include <cstdint>

#include "kernels/avx2_exp.h"
#include "kernels/gemm/packed_gemm.h"

namespace tfmrt::gemm {
namespace {

constexpr int kRows = 6;

// Rows [0, MR) of x times columns [0, cols) (cols in 1..16) of a 16-column panel, whose kk-th
// row starts at panel + kk * 16.
template <int MR>
void block(const float *x, int64_t k, const float *panel, int cols, const Epilogue &e, int64_t n, float *y) {
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  const float *xr[MR];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) xr[i] = x + i * k;
#pragma GCC unroll 4
  for (int64_t kk = 0; kk < k; ++kk) {
    const float *w = panel + kk * 16;
    const __m256 w0 = _mm256_load_ps(w), w1 = _mm256_load_ps(w + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m256 a = _mm256_broadcast_ss(xr[i] + kk);
      acc[i][0] = _mm256_fmadd_ps(a, w0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, w1, acc[i][1]);
    }
  }
#pragma GCC unroll 2
  for (int j = 0; j < 2; ++j) {
    const int c0 = j * 8;
    if (c0 >= cols) break;
    const bool whole = cols - c0 >= 8;
    const __m256i mask = avx2::tailMask(whole ? 8 : cols - c0);
    const __m256 bias = e.bias ? _mm256_maskload_ps(e.bias + c0, mask) : _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      __m256 v = _mm256_add_ps(acc[i][j], bias);
      if (e.relu) v = _mm256_max_ps(v, _mm256_setzero_ps());
      if (e.residual) v = _mm256_add_ps(v, _mm256_maskload_ps(e.residual + i * n + c0, mask));
      if (whole)
        _mm256_storeu_ps(y + i * n + c0, v);
      else
        _mm256_maskstore_ps(y + i * n + c0, mask, v);
    }
  }
}

}  // namespace

void gemmPanelsAvx2(const float *x, int64_t m, int64_t k, const float *packed, int64_t n, int64_t p0, int64_t p1,
                    const Epilogue &e, float *y) {
  // Panel groups of ~256 KB (half of this CPU class's L2) with the row blocks outside the group,
  // as in the AVX-512 body.
  constexpr int64_t W = kAvx2PanelCols;
  const int64_t panelBytes = k * W * 4;
  const int64_t group = panelBytes >= (int64_t(256) << 10) ? 1 : (int64_t(256) << 10) / panelBytes;
  for (int64_t g0 = p0; g0 < p1; g0 += group) {
    const int64_t g1 = g0 + group < p1 ? g0 + group : p1;
    for (int64_t r = 0, rows = 0; r < m; r += rows) {
      // 6-row blocks, but the last 7 or 8 rows as 4 + 3 or 4 + 4: a block of 1 or 2 rows has 2 or
      // 4 accumulator chains, too few to hide the FMA latency (4 cycles x 2 pipes), so it costs 4
      // cycles per kk like a block of 4 (6 rows: 6). M = 32, the greedy decoder's rows: 4 x 6 +
      // 4 + 4, 32 cycles per kk and panel, instead of 5 x 6 + 2, 34.
      rows = m - r == 7 || m - r == 8 ? 4 : int(m - r < kRows ? m - r : kRows);
      const float *xb = x + r * k;
      for (int64_t p = g0; p < g1; ++p) {
        const float *panel = packed + p * k * W;
        const int64_t c0 = p * W;
        const int cols = int(n - c0 < W ? n - c0 : W);
        float *yb = y + r * n + c0;
        Epilogue be = e;
        if (be.bias) be.bias += c0;
        if (be.residual) be.residual += r * n + c0;
        switch (rows) {
          case 1: block<1>(xb, k, panel, cols, be, n, yb); break;
          case 2: block<2>(xb, k, panel, cols, be, n, yb); break;
          case 3: block<3>(xb, k, panel, cols, be, n, yb); break;
          case 4: block<4>(xb, k, panel, cols, be, n, yb); break;
          case 5: block<5>(xb, k, panel, cols, be, n, yb); break;
          default: block<6>(xb, k, panel, cols, be, n, yb); break;
        }
      }
    }
  }
}

}  // namespace tfmrt::gemm
