// AMX bodies of the packed few-rows GEMMs: bf16 (packed_gemm.h: the AVX512-BF16 body's panels and
// x pairs, TDPBF16PS) and int8 (packed_gemm_int8.h: the VNNI body's panels and quantized rows,
// TDPBUSD: exact int32 sums and the VNNI epilogue, so the same bits as that body).
//
// Why: on Intel's AMX CPUs (Sapphire / Emerald Rapids) vdpbf16ps runs at half the f32 FMA rate
// (measured here: 80 vs 165 GFLOP/s per core), so the AVX512-BF16 body was slower than f32 and
// --precision=bf16 gained nothing; the tiles multiply at ~1.7 TFLOP/s per core.
//
// Both layouts serve the tiles as they are. A k step is a bf16 pair or an int8 quad, 4 bytes
// either way: a B tile (16 k steps x 16 columns) is 16 rows of 64 bytes, 256 bytes apart in a
// panel of 64 columns; an A tile (16 rows x 16 k steps) is 16 rows of 64 bytes, a row of x apart.
// C blocks are 32 rows x 32 columns (2 x 2 tiles; the other four tile registers hold two A and two
// B tiles), stored to a small buffer for the epilogue.
//
// Compiled with -mamx-tile -mamx-bf16 -mamx-int8 -mavx512f -mavx512bw -mavx512vl -mavx512dq
// -ffp-contract=off (the int8 epilogue must round as the VNNI body's); entered only after
// gemm::cpuHasAmxBf16() / int8::cpuHasAmxInt8() (which also ask Linux for the tile state). Same
// rules as packed_gemm_avx512.cpp: no C++ library header, no inline function of a shared header.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/gemm/packed_gemm.h"
#include "kernels/gemm/packed_gemm_int8.h"

namespace tfmrt::gemm {
namespace {

// Palette 1; every tile 16 rows x 64 bytes: C 0-3, A 4-5, B 6-7.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t startRow = 0;
  uint8_t reserved[14] = {};
  uint16_t colsBytes[16] = {};
  uint8_t rows[16] = {};
};

// C tiles of the 32-row block at x (rows `xStride` bytes apart) times panel columns [half, half +
// 32), over `steps` k steps (a multiple of 16). `stage` (tail blocks only, else null): a 32 x 64
// byte buffer whose rows past `rows` are zero; each step's A rows are copied into it, so the tiles
// keep their 16 rows (a second tile configuration would cost an ldtilecfg per switch, which
// measured slower than the copies: M = 115 ran 10-15 % slower than M = 128).
template <bool Int8, bool Two>
void product(const uint8_t *x, int64_t xStride, int64_t steps, const uint8_t *panel, int half, int rows,
             uint8_t *stage) {
  _tile_zero(0);
  _tile_zero(1);
  if (Two) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t q0 = 0; q0 < steps; q0 += 16) {
    const uint8_t *b = panel + (q0 * kPanelCols + half) * 4;
    const uint8_t *a = x + q0 * 4;
    int64_t aStride = xStride;
    if (stage) {
      for (int i = 0; i < rows; ++i) _mm512_store_si512(stage + i * 64, _mm512_loadu_si512(a + i * xStride));
      a = stage;
      aStride = 64;
    }
    _tile_loadd(4, a, aStride);
    _tile_loadd(6, b, kPanelCols * 4);
    _tile_loadd(7, b + 64, kPanelCols * 4);
    if (Int8) {
      _tile_dpbusd(0, 4, 6);
      _tile_dpbusd(1, 4, 7);
    } else {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
    }
    if (Two) {
      _tile_loadd(5, a + 16 * aStride, aStride);
      if (Int8) {
        _tile_dpbusd(2, 5, 6);
        _tile_dpbusd(3, 5, 7);
      } else {
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
}

// The C tiles as 32 x 32 four-byte elements (f32 or int32), rows 128 bytes apart. (The tile
// intrinsics paste their tile numbers into the instruction text, so they cannot be template
// parameters: product() above names every tile literally, for one and for two row tiles.)
template <bool Two>
void storeC(void *buf) {
  uint8_t *c = static_cast<uint8_t *>(buf);
  _tile_stored(0, c, 128);
  _tile_stored(1, c + 64, 128);
  if (Two) {
    _tile_stored(2, c + 16 * 128, 128);
    _tile_stored(3, c + 16 * 128 + 64, 128);
  }
}

// Panels [p0, p1), every 32-row block of x and both 32-column halves of a panel; `epilogue(buf,
// c0, r, rows, half, cols)` writes a block's results (buf: 32 x 32 four-byte sums) to y.
template <bool Int8, class Epilogue32>
void drive(const uint8_t *x, int64_t xStride, int64_t steps, const uint8_t *packed, int64_t panelBytes, int64_t m,
           int64_t n, int64_t p0, int64_t p1, const Epilogue32 &epilogue) {
  alignas(64) int32_t buf[32 * 32];
  alignas(64) uint8_t stage[32 * 64];
  for (int i = 0; i < 32 * 64; i += 64) _mm512_store_si512(stage + i, _mm512_setzero_si512());
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsBytes[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
  // Panel by panel: each read from memory once per call, then from L1/L2 by every row block.
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t *panel = packed + p * panelBytes;
    const int64_t c0 = p * kPanelCols;
    const int cols = int(n - c0 < kPanelCols ? n - c0 : kPanelCols);
    for (int64_t r = 0; r < m; r += 32) {
      const int rows = m - r < 32 ? int(m - r) : 32;
      uint8_t *tailStage = rows < 32 ? stage : nullptr;
      for (int half = 0; half < cols; half += 32) {
        if (rows > 16) {
          product<Int8, true>(x + r * xStride, xStride, steps, panel, half, rows, tailStage);
          storeC<true>(buf);
        } else {
          product<Int8, false>(x + r * xStride, xStride, steps, panel, half, rows, tailStage);
          storeC<false>(buf);
        }
        epilogue(buf, c0, r, rows, half, cols);
      }
    }
  }
  _tile_release();
}

__mmask16 columnMask(int cols, int c0) { return cols - c0 >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cols - c0)) - 1u); }

}  // namespace

void gemmPanelsBf16Amx(const uint32_t *xPairs, int64_t m, int64_t k, const uint16_t *packed, int64_t n, int64_t p0,
                       int64_t p1, const Epilogue &e, float *y) {
  const int64_t kp = (k + 1) / 2;  // pairCount, written out; a multiple of 16 (amxFits)
  drive<false>(reinterpret_cast<const uint8_t *>(xPairs), kp * 4, kp, reinterpret_cast<const uint8_t *>(packed),
               kp * kPanelCols * 4, m, n, p0, p1,
               [&](const int32_t *buf, int64_t pc0, int64_t r, int rows, int half, int cols) {
                 const float *c = reinterpret_cast<const float *>(buf);
                 float *yb = y + r * n + pc0;
                 for (int j = 0; j < 2; ++j) {
                   const int c0 = half + j * 16;
                   if (c0 >= cols) break;
                   const __mmask16 mask = columnMask(cols, c0);
                   const __m512 bias = e.bias ? _mm512_maskz_loadu_ps(mask, e.bias + pc0 + c0) : _mm512_setzero_ps();
                   const float *residual = e.residual ? e.residual + r * n + pc0 + c0 : nullptr;
                   for (int i = 0; i < rows; ++i) {
                     __m512 v = _mm512_add_ps(_mm512_load_ps(c + i * 32 + j * 16), bias);
                     if (e.relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
                     if (residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, residual + i * n));
                     _mm512_mask_storeu_ps(yb + i * n + c0, mask, v);
                   }
                 }
               });
}

namespace int8 {

void gemmAmxInt8(const uint8_t *xq, const float *sx, int64_t m, int64_t k, const PackedWeight &w, int64_t n,
                 int64_t p0, int64_t p1, const Epilogue &e, float *y) {
  const int64_t quads = (k + 3) / 4;  // quadCount, written out; a multiple of 16 (amxInt8Fits)
  drive<true>(xq, quads * 4, quads, reinterpret_cast<const uint8_t *>(w.panels), quads * kPanelCols * 4, m, n, p0, p1,
              [&](const int32_t *buf, int64_t pc0, int64_t r, int rows, int half, int cols) {
                float *yb = y + r * n + pc0;
                // float(acc - 128 sum qw) * (sx * sw) + bias, relu, + residual: the VNNI body's order.
                for (int j = 0; j < 2; ++j) {
                  const int c0 = half + j * 16;
                  if (c0 >= cols) break;
                  const __mmask16 mask = columnMask(cols, c0);
                  const __m512 sw = _mm512_loadu_ps(w.scales + pc0 + c0);
                  const __m512i off = _mm512_loadu_si512(w.offsets + pc0 + c0);
                  const __m512 bias = e.bias ? _mm512_maskz_loadu_ps(mask, e.bias + pc0 + c0) : _mm512_setzero_ps();
                  const float *residual = e.residual ? e.residual + r * n + pc0 + c0 : nullptr;
                  for (int i = 0; i < rows; ++i) {
                    const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(sx[r + i]), sw);
                    const __m512i acc = _mm512_load_si512(buf + i * 32 + j * 16);
                    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc, off)), scale);
                    if (e.bias) v = _mm512_add_ps(v, bias);
                    if (e.relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
                    if (residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, residual + i * n));
                    _mm512_mask_storeu_ps(yb + i * n + c0, mask, v);
                  }
                }
              });
}

}  // namespace int8
}  // namespace tfmrt::gemm
