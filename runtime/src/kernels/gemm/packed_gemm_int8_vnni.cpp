// AVX512-VNNI body of the int8 GEMM (packed_gemm_int8.h): vpdpbusd multiplies 4 unsigned by 4
// signed bytes per 32-bit lane and adds them to an int32 accumulator, four times the
// multiply-adds of an f32 FMA per instruction on a quarter of the weight bytes (one thread, 126
// rows, K = 256 here: ~575 G int8 ops/s against ~250 GFLOP/s f32).
//
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -ffp-contract=off and
// entered only after cpuHasAvx512Vnni(). Same rules as packed_gemm_avx512.cpp: no C++ library
// header, no inline function of a shared header, internal templates only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/gemm/packed_gemm_int8.h"

namespace tfmrt::gemm::int8 {
namespace {

constexpr int kRows = 6;  // 6 x 4 accumulators + 4 panel vectors + 1 broadcast

template <int MR>
void block(const uint8_t *x, int64_t stride, int64_t quads, const int8_t *panel, const float *sx, const float *scales,
           const int32_t *offsets, int cols, const Epilogue &e, int64_t n, float *y) {
  __m512i acc[MR][4];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_si512();
#pragma GCC unroll 2
  for (int64_t q = 0; q < quads; ++q) {
    const int8_t *w = panel + q * 256;
    const __m512i w0 = _mm512_load_si512(w), w1 = _mm512_load_si512(w + 64), w2 = _mm512_load_si512(w + 128),
                  w3 = _mm512_load_si512(w + 192);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      int32_t four;
      __builtin_memcpy(&four, x + i * stride + q * 4, 4);
      const __m512i a = _mm512_set1_epi32(four);
      acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], a, w0);
      acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], a, w1);
      acc[i][2] = _mm512_dpbusd_epi32(acc[i][2], a, w2);
      acc[i][3] = _mm512_dpbusd_epi32(acc[i][3], a, w3);
    }
  }
  // float(acc - 128 sum qw) * (sx * sw) + bias, relu, + residual: the reference's order.
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const int c0 = j * 16;
    if (c0 >= cols) break;
    const __mmask16 mask = cols - c0 >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cols - c0)) - 1u);
    const __m512 sw = _mm512_loadu_ps(scales + c0);
    const __m512i off = _mm512_loadu_si512(offsets + c0);
    const __m512 bias = e.bias ? _mm512_maskz_loadu_ps(mask, e.bias + c0) : _mm512_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(sx[i]), sw);
      __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][j], off)), scale);
      if (e.bias) v = _mm512_add_ps(v, bias);
      if (e.relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
      if (e.residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, e.residual + i * n + c0));
      _mm512_mask_storeu_ps(y + i * n + c0, mask, v);
    }
  }
}

}  // namespace

void quantizeRowsAvx512(const float *x, int64_t m, int64_t k, uint8_t *xq, float *sx) {
  const int64_t stride = (k + 3) / 4 * 4;  // rowBytes(k), written out: no inline function of a shared header here
  const __m512 absMask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF)), big = _mm512_set1_ps(3.40282347e38f);
  for (int64_t i = 0; i < m; ++i) {
    const float *row = x + i * k;
    __m512 maxAbs = _mm512_setzero_ps();
    __mmask16 nonFinite = 0;
    for (int64_t c = 0; c < k; c += 16) {
      const __mmask16 mask = k - c >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (k - c)) - 1u);
      const __m512 a = _mm512_and_ps(_mm512_maskz_loadu_ps(mask, row + c), absMask);
      nonFinite |= _mm512_cmp_ps_mask(a, big, _CMP_NLE_UQ);  // > FLT_MAX or NaN
      maxAbs = _mm512_max_ps(maxAbs, a);
    }
    // As the reference's scalesOf.
    const float mx = _mm512_reduce_max_ps(maxAbs);
    float inverse;
    if (nonFinite) {
      sx[i] = __builtin_nanf("");
      inverse = 0.0f;
    } else if (mx < kTinyMax) {
      sx[i] = 0.0f;
      inverse = 0.0f;
    } else {
      sx[i] = mx / 127.0f;
      inverse = 127.0f / mx;
    }
    const __m512 inv = _mm512_set1_ps(inverse), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    uint8_t *out = xq + i * stride;
    int64_t c = 0;
    for (; c < k; c += 16) {
      const __mmask16 mask = k - c >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (k - c)) - 1u);
      // round(x * inverse) to nearest even, clamped (max(r, lo): NaN gives -127, as std::max in the
      // reference; the row's scale is NaN then anyway), + 128.
      const __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(mask, row + c), inv),
                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(r, lo), hi)), _mm512_set1_epi32(128));
      _mm_mask_storeu_epi8(out + c, mask, _mm512_cvtepi32_epi8(q));
    }
    for (c = k; c < stride; ++c) out[c] = 128;
  }
}

void gemmAvx512Vnni(const uint8_t *xq, const float *sx, int64_t m, int64_t k, const PackedWeight &w, int64_t n,
                    int64_t p0, int64_t p1, const Epilogue &e, float *y) {
  // Panel by panel, every row block over one panel (16 KB at K = 256: it stays in L1), the next
  // panel prefetched a slice per row block meanwhile.
  // quadCount, rowBytes and panelBytes written out (no inline function of a shared header here).
  const int64_t quads = (k + 3) / 4, stride = quads * 4, bytes = quads * kPanelCols * 4, lines = bytes / 64;
  const int64_t rowBlocks = (m + kRows - 1) / kRows;
  const int64_t perBlock = (lines + rowBlocks - 1) / rowBlocks;
  for (int64_t p = p0; p < p1; ++p) {
    const int8_t *panel = w.panels + p * bytes;
    const uintptr_t next = reinterpret_cast<uintptr_t>(panel) + uintptr_t(bytes);  // may point past the end: prefetch only
    const int64_t c0 = p * kPanelCols;
    const int cols = int(n - c0 < kPanelCols ? n - c0 : kPanelCols);
    const float *scales = w.scales + c0;
    const int32_t *offsets = w.offsets + c0;
    int64_t line = 0;
    for (int64_t r = 0; r < m; r += kRows) {
      const int rows = m - r < kRows ? int(m - r) : kRows;
      const uint8_t *xb = xq + r * stride;
      float *yb = y + r * n + c0;
      Epilogue be = e;
      if (be.bias) be.bias += c0;
      if (be.residual) be.residual += r * n + c0;
      switch (rows) {
        case 1: block<1>(xb, stride, quads, panel, sx + r, scales, offsets, cols, be, n, yb); break;
        case 2: block<2>(xb, stride, quads, panel, sx + r, scales, offsets, cols, be, n, yb); break;
        case 3: block<3>(xb, stride, quads, panel, sx + r, scales, offsets, cols, be, n, yb); break;
        case 4: block<4>(xb, stride, quads, panel, sx + r, scales, offsets, cols, be, n, yb); break;
        case 5: block<5>(xb, stride, quads, panel, sx + r, scales, offsets, cols, be, n, yb); break;
        default: block<6>(xb, stride, quads, panel, sx + r, scales, offsets, cols, be, n, yb); break;
      }
      if (p + 1 < p1)
        for (const int64_t end = line + perBlock < lines ? line + perBlock : lines; line < end; ++line)
          _mm_prefetch(reinterpret_cast<const char *>(next + uintptr_t(line) * 64), _MM_HINT_T1);
    }
  }
}

}  // namespace tfmrt::gemm::int8
