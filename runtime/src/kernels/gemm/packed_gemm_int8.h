// GEMM with int8 operands for weight_layout "packed_int8" (tfmc compile --precision=int8):
//
//   y[m, n] = act(float(sum_k qx[m, k] qw[n, k]) * (sx[m] * sw[n]) + bias[n]) + residual[m, n]
//
// The weight is quantized once per weights version, per output column (symmetric: sw[n] =
// max_k |W[n, k]| / 127, qw = round(W * (127 / max_k |W[n, k]|)) in [-127, 127]); each row of x
// per call (sx[m] = max_k |x[m, k]| / 127, qx = round(x * (127 / max_k |x[m, k]|))). Rounding is
// to nearest even. A vector whose largest magnitude is below kTinyMax (or zero) quantizes to zeros
// with scale 0 (its reciprocal would overflow); one holding NaN or an infinity gets scale NaN, so
// its results are NaN as in f32. The dot products are exact in int32 (K <= kMaxK); only the
// scale, bias, activation and residual are float, in that order, without fused multiply-adds, so
// the AVX512-VNNI body and the portable loops give the same bits.
//
// VNNI's vpdpbusd multiplies unsigned by signed bytes, so x is stored as qx + 128 (in [1, 255]) and
// 128 * sum_k qw[n, k] is subtracted per column (precomputed at packing).
//
// Packed weight: panel p holds columns [64p, 64p + 64) as [quad][column][4 bytes] (a quad = 4
// consecutive k; zeros past K and N), then per column its scale and its 128 * column sum.
#pragma once

#include <cstdint>

#include "kernels/gemm/packed_gemm.h"

namespace tfmrt::gemm::int8 {

constexpr float kTinyMax = 1e-30f;
// (qx + 128) qw <= 255 * 127 per k: int32 holds the sums of up to 2^31 / 32385 ~ 66300 of them.
constexpr int64_t kMaxK = 65536;

inline int64_t quadCount(int64_t k) { return (k + 3) / 4; }
inline int64_t rowBytes(int64_t k) { return quadCount(k) * 4; }  // a quantized x row, zero-padded
inline int64_t panelBytes(int64_t k) { return quadCount(k) * kPanelCols * 4; }

struct PackedWeight {
  const int8_t *panels = nullptr;  // panelCount(n) x panelBytes(k)
  const float *scales = nullptr;   // [panelCount(n) * 64], 0 past N
  const int32_t *offsets = nullptr;  // 128 * column sums, [panelCount(n) * 64]
};

// Sizes of the three parts, for a buffer the caller allocates.
inline int64_t packedPanelBytes(int64_t k, int64_t n) { return panelCount(n) * panelBytes(k); }
inline int64_t packedColumns(int64_t n) { return panelCount(n) * kPanelCols; }

// `w` is B^T = [N, K] row-major when `transposed` (a linear's weight), else B = [K, N].
void packWeight(const float *w, int64_t k, int64_t n, bool transposed, int8_t *panels, float *scales,
                int32_t *offsets);

// Rows of x [m, k] -> xq [m, rowBytes(k)] (qx + 128; 128 past K) and sx [m], k <= kMaxK.
void quantizeRowsReference(const float *x, int64_t m, int64_t k, uint8_t *xq, float *sx);
// Rows [0, m) and panels [p0, p1) of y (the plain loops the VNNI body is tested against, and the
// fallback without VNNI).
void gemmReference(const uint8_t *xq, const float *sx, int64_t m, int64_t k, const PackedWeight &w, int64_t n,
                   int64_t p0, int64_t p1, const Epilogue &e, float *y);

// AVX512-VNNI (with AVX512BW): the same results. Enter only after cpuHasAvx512Vnni().
bool cpuHasAvx512Vnni();
// What packed_int8 sites run on the fast backend: the VNNI body where the CPU has it, else the f32
// packed GEMM (the plain int8 loops would be ~11x slower than f32 there: test_2016 greedy 7.2 vs
// 0.65 s on a Zen 5). TFMC_INT8_ISA=portable runs the plain int8 loops instead, =f32 the f32
// GEMM, whatever the CPU (as ONEDNN_MAX_CPU_ISA caps oneDNN: to test each path anywhere).
enum class Int8Path { Vnni, Portable, F32 };
Int8Path int8Path();
// TFMC_INT8_ISA parsed: unset or empty (Auto), vnni, portable, f32; any other value is Unknown,
// which int8 kernels refuse at load.
enum class Int8IsaOverride { Auto, Vnni, Portable, F32, Unknown };
Int8IsaOverride int8IsaOverride();
// AMX-INT8 (Intel Xeon since Sapphire Rapids): the VNNI body's operands and bits through tiles.
// Needs quadCount(k) % 16 == 0 (amxInt8Fits: k a multiple of 64). cpuHasAmxInt8(): the CPU has it,
// ONEDNN_MAX_CPU_ISA (if set) allows AVX512_CORE_AMX, Linux granted the tile state, and
// TFMC_INT8_ISA is not "vnni" (the VNNI body on such a CPU).
bool cpuHasAmxInt8();
inline bool amxInt8Fits(int64_t k) { return k > 0 && quadCount(k) % 16 == 0; }
void gemmAmxInt8(const uint8_t *xq, const float *sx, int64_t m, int64_t k, const PackedWeight &w, int64_t n,
                 int64_t p0, int64_t p1, const Epilogue &e, float *y);
void quantizeRowsAvx512(const float *x, int64_t m, int64_t k, uint8_t *xq, float *sx);
void gemmAvx512Vnni(const uint8_t *xq, const float *sx, int64_t m, int64_t k, const PackedWeight &w, int64_t n,
                    int64_t p0, int64_t p1, const Epilogue &e, float *y);

}  // namespace tfmrt::gemm::int8
