// AVX-512 body of the packed small-M GEMM (packed_gemm.h).
//
// Compiled with -mavx512f -mavx512vl -mavx512dq -mfma and entered only after
// attention::cpuHasAvx512(). Like attention_avx512.cpp it includes no C++ library header and calls
// no inline function of a shared header (an AVX-512 copy of one could be picked by the linker for
// the whole library); its templates have internal linkage.
//
// GCC 12 warns about _mm512_undefined_ps() inside its own masked intrinsics (a known false
// positive of -Wmaybe-uninitialized in avx512fintrin.h).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/gemm/packed_gemm.h"

namespace tfmrt::gemm {
namespace {

constexpr int kRows = 6;  // rows per block: 6 x 4 accumulators + 4 panel vectors + 1 broadcast

// The first row block of a panel group reads its panels from L3 or memory (a decoder step's
// weights, ~19 MB for the small model, do not stay in cache between steps); it prefetches the
// panel kAhead k-steps (4 KB) ahead, past the panel's end into the next one. Later row blocks
// find the group in L2. Translation, alternating runs: decode_step GEMMs 1-3 % faster.
constexpr int64_t kAhead = 16;

template <int MR, bool Prefetch>
void block(const float *x, int64_t k, const float *panel, int cols, const Epilogue &e, int64_t n, float *y) {
  __m512 acc[MR][4];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
  const float *xr[MR];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) xr[i] = x + i * k;
#pragma GCC unroll 2
  for (int64_t kk = 0; kk < k; ++kk) {
    const float *w = panel + kk * 64;
    if (Prefetch) {
      // The address by integer arithmetic: past the last panel it points beyond the buffer, which
      // a prefetch may (it never faults) but pointer arithmetic may not.
      const char *ahead = reinterpret_cast<const char *>(reinterpret_cast<uintptr_t>(w) + kAhead * 64 * sizeof(float));
      _mm_prefetch(ahead, _MM_HINT_T0);
      _mm_prefetch(ahead + 64, _MM_HINT_T0);
      _mm_prefetch(ahead + 128, _MM_HINT_T0);
      _mm_prefetch(ahead + 192, _MM_HINT_T0);
    }
    const __m512 w0 = _mm512_load_ps(w), w1 = _mm512_load_ps(w + 16), w2 = _mm512_load_ps(w + 32),
                 w3 = _mm512_load_ps(w + 48);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(xr[i][kk]);
      acc[i][0] = _mm512_fmadd_ps(a, w0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(a, w1, acc[i][1]);
      acc[i][2] = _mm512_fmadd_ps(a, w2, acc[i][2]);
      acc[i][3] = _mm512_fmadd_ps(a, w3, acc[i][3]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const int c0 = j * 16;
    if (c0 >= cols) break;
    const __mmask16 mask = cols - c0 >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cols - c0)) - 1u);
    const __m512 bias = e.bias ? _mm512_maskz_loadu_ps(mask, e.bias + c0) : _mm512_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      __m512 v = _mm512_add_ps(acc[i][j], bias);
      if (e.relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
      if (e.residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, e.residual + i * n + c0));
      _mm512_mask_storeu_ps(y + i * n + c0, mask, v);
    }
  }
}

}  // namespace

void gemmPanelsAvx512(const float *x, int64_t m, int64_t k, const float *packed, int64_t n, int64_t p0, int64_t p1,
                      const Epilogue &e, float *y) {
  // Panels in groups of ~512 KB (stay in L2) with the row blocks outside the group: a 6-row block
  // of x stays in L1 across the group, and its results are written as 6 runs of up to 2 KB. Rows
  // outermost over all panels would write 6 rows 32 KB apart per panel at N = 8000, a TLB miss per
  // store run (measured 6-18 % slower than oneDNN at M >= 128 before this grouping).
  const int64_t panelBytes = k * 64 * 4;
  const int64_t group = panelBytes >= (int64_t(512) << 10) ? 1 : (int64_t(512) << 10) / panelBytes;
  for (int64_t g0 = p0; g0 < p1; g0 += group) {
    const int64_t g1 = g0 + group < p1 ? g0 + group : p1;
    for (int64_t r = 0; r < m; r += kRows) {
      const int rows = m - r < kRows ? int(m - r) : kRows;
      const float *xb = x + r * k;
      for (int64_t p = g0; p < g1; ++p) {
        const float *panel = packed + p * k * 64;
        const int64_t c0 = p * 64;
        const int cols = int(n - c0 < 64 ? n - c0 : 64);
        float *yb = y + r * n + c0;
        Epilogue be = e;
        if (be.bias) be.bias += c0;
        if (be.residual) be.residual += r * n + c0;
        if (r == 0) {
          switch (rows) {
            case 1: block<1, true>(xb, k, panel, cols, be, n, yb); break;
            case 2: block<2, true>(xb, k, panel, cols, be, n, yb); break;
            case 3: block<3, true>(xb, k, panel, cols, be, n, yb); break;
            case 4: block<4, true>(xb, k, panel, cols, be, n, yb); break;
            case 5: block<5, true>(xb, k, panel, cols, be, n, yb); break;
            default: block<6, true>(xb, k, panel, cols, be, n, yb); break;
          }
          continue;
        }
        switch (rows) {
          case 1: block<1, false>(xb, k, panel, cols, be, n, yb); break;
          case 2: block<2, false>(xb, k, panel, cols, be, n, yb); break;
          case 3: block<3, false>(xb, k, panel, cols, be, n, yb); break;
          case 4: block<4, false>(xb, k, panel, cols, be, n, yb); break;
          case 5: block<5, false>(xb, k, panel, cols, be, n, yb); break;
          default: block<6, false>(xb, k, panel, cols, be, n, yb); break;
        }
      }
    }
  }
}

}  // namespace tfmrt::gemm
