// AMX body of the packed few-rows GEMM with bf16 operands (packed_gemm.h): the same bf16 panels
// and x pairs as the AVX512-BF16 body, multiplied by tile instructions (TDPBF16PS: a 16 x 32
// bf16 tile times a 32 x 16 one into a 16 x 16 f32 tile).
//
// Why: on Intel's AMX CPUs (Sapphire / Emerald Rapids) vdpbf16ps runs at half the f32 FMA rate
// (measured here: 80 vs 165 GFLOP/s per core), so the AVX512-BF16 body was slower than f32 and
// --precision=bf16 gained nothing; the tiles multiply at ~1.7 TFLOP/s per core.
//
// The panel layout serves the tiles as it is: a B tile (16 pairs of k x 16 columns) is 16 rows of
// 64 bytes, 256 bytes apart in a panel; an A tile (16 rows x 16 pairs) is 16 rows of 64 bytes,
// kp x 4 bytes apart in x's pairs. C blocks are 32 rows x 32 columns (2 x 2 tiles, the other four
// tile registers hold two A and two B tiles), stored to a small buffer for the epilogue.
//
// Compiled with -mamx-tile -mamx-bf16 -mavx512f -mavx512vl -mavx512dq; entered only after
// gemm::cpuHasAmxBf16() (which also asks Linux for the tile state). Same rules as
// packed_gemm_avx512.cpp: no C++ library header, no inline function of a shared header.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/gemm/packed_gemm.h"

namespace tfmrt::gemm {
namespace {

// The tile configuration (palette 1): tiles 0-3 are C (rows x 64 bytes of f32), 4-5 A (rows x 64
// bytes of pairs), 6-7 B (16 pairs x 64 bytes).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t startRow = 0;
  uint8_t reserved[14] = {};
  uint16_t colsBytes[16] = {};
  uint8_t rows[16] = {};
};

void describe(TileConfig &c) {
  for (int t = 0; t < 8; ++t) {
    c.colsBytes[t] = 64;
    c.rows[t] = 16;
  }
}

// C block rows [r, r + rows) x panel columns [half, half + 32) -> buf (32 x 32 f32), then the
// epilogue into y. `two`: the block has a second 16-row half.
// `stage` (tail blocks only, else null): a 32-row x 16-pair buffer whose rows past `rows` are
// zero; each k step's A rows are copied into it, so the tiles keep their 16 rows (a tile
// configuration of fewer rows would cost a ldtilecfg per switch, which measured slower than the
// copies).
template <bool Two>
void block(const uint32_t *x, int64_t kp, const uint16_t *panel, int half, int rows, int cols, const Epilogue &e,
           int64_t n, float *y, float *buf, uint32_t *stage) {
  _tile_zero(0);
  _tile_zero(1);
  if (Two) {
    _tile_zero(2);
    _tile_zero(3);
  }
  const int64_t xStride = kp * 4;
  for (int64_t q0 = 0; q0 < kp; q0 += 16) {
    const uint16_t *b = panel + (q0 * kPanelCols + half) * 2;
    const uint32_t *a = x + q0;
    int64_t aStride = xStride;
    if (stage) {
      for (int i = 0; i < rows; ++i) _mm512_store_si512(stage + i * 16, _mm512_loadu_si512(x + i * kp + q0));
      a = stage;
      aStride = 64;
    }
    _tile_loadd(4, a, aStride);
    _tile_loadd(6, b, kPanelCols * 4);
    _tile_loadd(7, b + 32, kPanelCols * 4);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (Two) {
      _tile_loadd(5, stage ? a + 16 * 16 : a + 16 * kp, aStride);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, buf, 128);
  _tile_stored(1, buf + 16, 128);
  if (Two) {
    _tile_stored(2, buf + 16 * 32, 128);
    _tile_stored(3, buf + 16 * 32 + 16, 128);
  }
  for (int j = 0; j < 2; ++j) {
    const int c0 = half + j * 16;
    if (c0 >= cols) break;
    const __mmask16 mask = cols - c0 >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cols - c0)) - 1u);
    const __m512 bias = e.bias ? _mm512_maskz_loadu_ps(mask, e.bias + c0) : _mm512_setzero_ps();
    for (int i = 0; i < rows; ++i) {
      __m512 v = _mm512_add_ps(_mm512_load_ps(buf + i * 32 + j * 16), bias);
      if (e.relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
      if (e.residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, e.residual + i * n + c0));
      _mm512_mask_storeu_ps(y + i * n + c0, mask, v);
    }
  }
}

}  // namespace

void gemmPanelsBf16Amx(const uint32_t *xPairs, int64_t m, int64_t k, const uint16_t *packed, int64_t n, int64_t p0,
                       int64_t p1, const Epilogue &e, float *y) {
  const int64_t kp = pairCount(k);  // a multiple of 16 (amxFits)
  alignas(64) float buf[32 * 32];
  alignas(64) uint32_t stage[32 * 16];
  for (int i = 0; i < 32 * 16; i += 16) _mm512_store_si512(stage + i, _mm512_setzero_si512());
  TileConfig config;
  describe(config);
  _tile_loadconfig(&config);
  // Panel by panel: each read from memory once per call, then from L1/L2 by every row block.
  const int64_t panelElements = kp * kPanelCols * 2;
  for (int64_t p = p0; p < p1; ++p) {
    const uint16_t *panel = packed + p * panelElements;
    const int64_t c0 = p * kPanelCols;
    const int cols = int(n - c0 < kPanelCols ? n - c0 : kPanelCols);
    for (int64_t r = 0; r < m; r += 32) {
      const int rows = m - r < 32 ? int(m - r) : 32;
      Epilogue be = e;
      if (be.bias) be.bias += c0;
      if (be.residual) be.residual += r * n + c0;
      uint32_t *tailStage = rows < 32 ? stage : nullptr;
      for (int half = 0; half < cols; half += 32) {
        if (rows > 16) block<true>(xPairs + r * kp, kp, panel, half, rows, cols, be, n, y + r * n + c0, buf, tailStage);
        else block<false>(xPairs + r * kp, kp, panel, half, rows, cols, be, n, y + r * n + c0, buf, tailStage);
      }
    }
  }
  _tile_release();
}

}  // namespace tfmrt::gemm
