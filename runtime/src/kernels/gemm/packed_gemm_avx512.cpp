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
// Up to this many rows (decoder steps) the panel-outer order (all of x stays in L2).
constexpr int64_t kPanelOuterMaxRows = 256;

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

// block<rows> for 1-6 rows.
template <bool Prefetch>
void rowBlock(int rows, const float *x, int64_t k, const float *panel, int cols, const Epilogue &e, int64_t n, float *y) {
  switch (rows) {
    case 1: return block<1, Prefetch>(x, k, panel, cols, e, n, y);
    case 2: return block<2, Prefetch>(x, k, panel, cols, e, n, y);
    case 3: return block<3, Prefetch>(x, k, panel, cols, e, n, y);
    case 4: return block<4, Prefetch>(x, k, panel, cols, e, n, y);
    case 5: return block<5, Prefetch>(x, k, panel, cols, e, n, y);
    default: return block<6, Prefetch>(x, k, panel, cols, e, n, y);
  }
}

}  // namespace

namespace {

// Few rows (decoder steps): panel by panel, every row block of x over one panel, the next panel
// prefetched a slice per row block meanwhile, so only the call's first panel waits on memory
// (grouped as below, the first row block over every group did: 11 % of a beam-4 run's GEMM time
// for 5 % of its work). Alternating test_2016 beam-4 runs: faster in 9 of 12 pairs (medians
// 1.92 vs 1.97 s), the vocabulary product 1.01-1.07 vs 1.05-1.11 ms per call.
void panelOuter(const float *x, int64_t m, int64_t k, const float *packed, int64_t n, int64_t p0, int64_t p1,
                const Epilogue &e, float *y) {
  const int64_t panelFloats = k * 64, lines = panelFloats * 4 / 64;
  const int64_t rowBlocks = (m + kRows - 1) / kRows;
  const int64_t perBlock = (lines + rowBlocks - 1) / rowBlocks;
  for (int64_t p = p0; p < p1; ++p) {
    const float *panel = packed + p * panelFloats;
    // By integer arithmetic: after the last panel the address is past the buffer, which a
    // prefetch may use (it never faults) but pointer arithmetic may not form.
    const uintptr_t next = reinterpret_cast<uintptr_t>(panel) + uintptr_t(panelFloats) * sizeof(float);
    const int64_t c0 = p * 64;
    const int cols = int(n - c0 < 64 ? n - c0 : 64);
    int64_t line = 0;
    for (int64_t r = 0; r < m; r += kRows) {
      const int rows = m - r < kRows ? int(m - r) : kRows;
      const float *xb = x + r * k;
      float *yb = y + r * n + c0;
      Epilogue be = e;
      if (be.bias) be.bias += c0;
      if (be.residual) be.residual += r * n + c0;
      if (p == p0 && r == 0) rowBlock<true>(rows, xb, k, panel, cols, be, n, yb);  // the call's cold panel
      else rowBlock<false>(rows, xb, k, panel, cols, be, n, yb);
      if (p + 1 < p1)
        for (const int64_t end = line + perBlock < lines ? line + perBlock : lines; line < end; ++line)
          _mm_prefetch(reinterpret_cast<const char *>(next + uintptr_t(line) * 64), _MM_HINT_T1);
    }
  }
}

}  // namespace

void gemmPanelsAvx512(const float *x, int64_t m, int64_t k, const float *packed, int64_t n, int64_t p0, int64_t p1,
                      const Epilogue &e, float *y) {
  // More rows (the encoder's ~1000-row blocks, training): panel-outer would re-read all of x from
  // L3 per panel (measured 3-5 % slower there). Panels in groups of ~512 KB (stay in L2) with the
  // row blocks outside the group: a 6-row block of x stays in L1 across the group, and its results
  // are written as 6 runs of up to 2 KB. Rows outermost over all panels would write 6 rows 32 KB
  // apart per panel at N = 8000, a TLB miss per store run (measured 6-18 % slower than oneDNN at
  // M >= 128 before this grouping).
  if (m <= kPanelOuterMaxRows) return panelOuter(x, m, k, packed, n, p0, p1, e, y);
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
        if (r == 0) rowBlock<true>(rows, xb, k, panel, cols, be, n, yb);
        else rowBlock<false>(rows, xb, k, panel, cols, be, n, yb);
      }
    }
  }
}

}  // namespace tfmrt::gemm
