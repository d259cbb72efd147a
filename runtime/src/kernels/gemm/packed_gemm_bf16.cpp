// AVX512-BF16 body of the packed few-rows GEMM with bf16 operands (packed_gemm.h): vdpbf16ps
// multiplies pairs of bf16 and accumulates in f32, twice the multiply-adds of an f32 FMA per
// instruction, on half the weight bytes.
//
// Compiled with -mavx512f -mavx512bf16 -mavx512vl -mavx512dq -mfma and entered only after
// gemm::cpuHasAvx512Bf16(). Same rules as packed_gemm_avx512.cpp: no C++ library header, no
// inline function of a shared header, internal templates only.
//
// GCC 12 warns about _mm512_undefined_ps() inside its own masked intrinsics (a known false
// positive of -Wmaybe-uninitialized in avx512fintrin.h).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/gemm/packed_gemm.h"

namespace tfmrt::gemm {
namespace {

constexpr int kRows = 6;

template <int MR>
void blockBf16(const uint32_t *x, int64_t kp, const uint16_t *panel, int cols, const Epilogue &e, int64_t n, float *y) {
  __m512 acc[MR][4];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t q = 0; q < kp; ++q) {
    const uint16_t *w = panel + q * 128;
    const __m512bh w0 = (__m512bh)_mm512_load_si512(w), w1 = (__m512bh)_mm512_load_si512(w + 32),
                   w2 = (__m512bh)_mm512_load_si512(w + 64), w3 = (__m512bh)_mm512_load_si512(w + 96);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(int(x[i * kp + q]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, w0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, w1);
      acc[i][2] = _mm512_dpbf16_ps(acc[i][2], a, w2);
      acc[i][3] = _mm512_dpbf16_ps(acc[i][3], a, w3);
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

void toBf16PairsAvx512Bf16(const float *x, int64_t m, int64_t k, uint32_t *pairs) {
  const int64_t kp = (k + 1) / 2;
  for (int64_t i = 0; i < m; ++i) {
    const float *row = x + i * k;
    uint16_t *out = reinterpret_cast<uint16_t *>(pairs + i * kp);
    for (int64_t c = 0; c < k; c += 16) {
      const int64_t left = k - c;
      const __mmask16 mask = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
      const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, row + c));
      _mm256_mask_storeu_epi16(out + c, mask, (__m256i)h);
    }
    if (k % 2) out[k] = 0;  // the odd column's partner
  }
}

namespace {

void rowBlockBf16(int rows, const uint32_t *xb, int64_t kp, const uint16_t *panel, int cols, const Epilogue &e, int64_t n,
                  float *yb) {
  switch (rows) {
    case 1: return blockBf16<1>(xb, kp, panel, cols, e, n, yb);
    case 2: return blockBf16<2>(xb, kp, panel, cols, e, n, yb);
    case 3: return blockBf16<3>(xb, kp, panel, cols, e, n, yb);
    case 4: return blockBf16<4>(xb, kp, panel, cols, e, n, yb);
    case 5: return blockBf16<5>(xb, kp, panel, cols, e, n, yb);
    default: return blockBf16<6>(xb, kp, panel, cols, e, n, yb);
  }
}

// Up to this many rows (decoder steps) the panel-outer order, as the f32 body.
constexpr int64_t kPanelOuterMaxRows = 256;

}  // namespace

void gemmPanelsBf16Avx512Bf16(const uint32_t *xPairs, int64_t m, int64_t k, const uint16_t *packed, int64_t n,
                              int64_t p0, int64_t p1, const Epilogue &e, float *y) {
  const int64_t kp = (k + 1) / 2, panelElements = kp * 128;
  // Written out again rather than shared with the f32 body as a template: one instantiated in
  // both TUs (different ISA flags) could be merged by the linker into a single copy for both.
  if (m > kPanelOuterMaxRows) {
    // The encoder's ~1000-row blocks (every inference product runs here on a CPU without AMX):
    // as the f32 body, panels in groups of ~512 KB that stay in L2, a 6-row block of x over the
    // whole group while it stays in L1. Panel-outer re-read all of x per panel (2 MB at 1024 rows
    // of K = 1024, more than a Zen 5's L2) and wrote each panel's columns to every row's page.
    const int64_t panelBytes = panelElements * 2;
    const int64_t group = panelBytes >= (int64_t(512) << 10) ? 1 : (int64_t(512) << 10) / panelBytes;
    for (int64_t g0 = p0; g0 < p1; g0 += group) {
      const int64_t g1 = g0 + group < p1 ? g0 + group : p1;
      for (int64_t r = 0; r < m; r += kRows) {
        const int rows = m - r < kRows ? int(m - r) : kRows;
        for (int64_t p = g0; p < g1; ++p) {
          const int64_t c0 = p * 64;
          Epilogue be = e;
          if (be.bias) be.bias += c0;
          if (be.residual) be.residual += r * n + c0;
          rowBlockBf16(rows, xPairs + r * kp, kp, packed + p * panelElements, int(n - c0 < 64 ? n - c0 : 64), be, n,
                       y + r * n + c0);
        }
      }
    }
    return;
  }
  // Few rows: panel by panel, every row block over one panel, the next panel prefetched a slice
  // per row block meanwhile, so only the call's first panel waits on memory.
  const int64_t lines = panelElements * 2 / 64;
  const int64_t rowBlocks = (m + kRows - 1) / kRows;
  const int64_t perBlock = (lines + rowBlocks - 1) / rowBlocks;
  for (int64_t p = p0; p < p1; ++p) {
    const uint16_t *panel = packed + p * panelElements;
    // By integer arithmetic: after the last panel the address is past the buffer.
    const uintptr_t next = reinterpret_cast<uintptr_t>(panel) + uintptr_t(panelElements) * sizeof(uint16_t);
    const int64_t c0 = p * 64;
    const int cols = int(n - c0 < 64 ? n - c0 : 64);
    int64_t line = 0;
    for (int64_t r = 0; r < m; r += kRows) {
      const int rows = m - r < kRows ? int(m - r) : kRows;
      Epilogue be = e;
      if (be.bias) be.bias += c0;
      if (be.residual) be.residual += r * n + c0;
      rowBlockBf16(rows, xPairs + r * kp, kp, panel, cols, be, n, y + r * n + c0);
      if (p + 1 < p1)
        for (const int64_t end = line + perBlock < lines ? line + perBlock : lines; line < end; ++line)
          _mm_prefetch(reinterpret_cast<const char *>(next + uintptr_t(line) * 64), _MM_HINT_T1);
    }
  }
}

}  // namespace tfmrt::gemm
