// Packing, row quantization and the plain loops of the int8 GEMM (packed_gemm_int8.h). Compiled
// with -ffp-contract=off, as is the VNNI body: the float epilogue must round identically in both.
#include "kernels/gemm/packed_gemm_int8.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace tfmrt::gemm::int8 {
namespace {

// The scale and the reciprocal a row or column is quantized with: max |v| / 127 and 127 / max |v|
// (0 and 0 for an all-zero or tiny vector; NaN and 0 when it holds a NaN or an infinity, so its
// results are NaN as they would be in f32).
void scalesOf(float maxAbs, bool nonFinite, float &scale, float &inverse) {
  if (nonFinite) {
    scale = std::numeric_limits<float>::quiet_NaN();
    inverse = 0.0f;
  } else if (maxAbs < kTinyMax) {
    scale = 0.0f;
    inverse = 0.0f;
  } else {
    scale = maxAbs / 127.0f;
    inverse = 127.0f / maxAbs;
  }
}

inline int32_t quantize(float v, float inverse) {
  const float q = std::nearbyint(v * inverse);  // to nearest even, as cvtps2dq
  return int32_t(std::min(127.0f, std::max(-127.0f, q)));
}

}  // namespace

void packWeight(const float *w, int64_t k, int64_t n, bool transposed, int8_t *panels, float *scales,
                int32_t *offsets) {
  const int64_t panels64 = panelCount(n);
  std::fill(panels, panels + panels64 * panelBytes(k), int8_t(0));
  std::fill(scales, scales + panels64 * kPanelCols, 0.0f);
  std::fill(offsets, offsets + panels64 * kPanelCols, 0);
  auto at = [&](int64_t kk, int64_t col) { return transposed ? w[col * k + kk] : w[kk * n + col]; };
  for (int64_t col = 0; col < n; ++col) {
    float maxAbs = 0.0f;
    bool nonFinite = false;
    for (int64_t kk = 0; kk < k; ++kk) {
      const float a = std::fabs(at(kk, col));
      if (!(a <= FLT_MAX)) nonFinite = true;
      else maxAbs = std::max(maxAbs, a);
    }
    float inverse = 0.0f;
    scalesOf(maxAbs, nonFinite, scales[col], inverse);
    int8_t *panel = panels + (col / kPanelCols) * panelBytes(k);
    const int64_t j = col % kPanelCols;
    int32_t sum = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      const int32_t q = quantize(at(kk, col), inverse);
      panel[((kk / 4) * kPanelCols + j) * 4 + kk % 4] = int8_t(q);
      sum += q;
    }
    offsets[col] = 128 * sum;
  }
}

void quantizeRowsReference(const float *x, int64_t m, int64_t k, uint8_t *xq, float *sx) {
  const int64_t stride = rowBytes(k);
  for (int64_t i = 0; i < m; ++i) {
    const float *row = x + i * k;
    float maxAbs = 0.0f;
    bool nonFinite = false;
    for (int64_t kk = 0; kk < k; ++kk) {
      const float a = std::fabs(row[kk]);
      if (!(a <= FLT_MAX)) nonFinite = true;
      else maxAbs = std::max(maxAbs, a);
    }
    float inverse = 0.0f;
    scalesOf(maxAbs, nonFinite, sx[i], inverse);
    uint8_t *out = xq + i * stride;
    for (int64_t kk = 0; kk < k; ++kk) out[kk] = uint8_t(quantize(row[kk], inverse) + 128);
    for (int64_t kk = k; kk < stride; ++kk) out[kk] = 128;
  }
}

void gemmReference(const uint8_t *xq, const float *sx, int64_t m, int64_t k, const PackedWeight &w, int64_t n,
                   int64_t p0, int64_t p1, const Epilogue &e, float *y) {
  const int64_t quads = quadCount(k), stride = rowBytes(k);
  for (int64_t p = p0; p < p1; ++p) {
    const int8_t *panel = w.panels + p * panelBytes(k);
    const int64_t c0 = p * kPanelCols, cols = std::min(kPanelCols, n - c0);
    for (int64_t i = 0; i < m; ++i) {
      // The panel's 64 sums for row i, reading the panel in order (the inner loop over 256
      // contiguous bytes vectorises); integer sums, so the order does not change them.
      int32_t acc[kPanelCols] = {};
      const uint8_t *row = xq + i * stride;
      for (int64_t q = 0; q < quads; ++q) {
        const int8_t *wq = panel + q * kPanelCols * 4;
        const int32_t x0 = row[q * 4], x1 = row[q * 4 + 1], x2 = row[q * 4 + 2], x3 = row[q * 4 + 3];
        for (int64_t j = 0; j < kPanelCols; ++j)
          acc[j] += x0 * wq[j * 4] + x1 * wq[j * 4 + 1] + x2 * wq[j * 4 + 2] + x3 * wq[j * 4 + 3];
      }
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t col = c0 + j;
        const float scale = sx[i] * w.scales[col];
        float v = float(acc[j] - w.offsets[col]) * scale;
        if (e.bias) v = v + e.bias[col];
        if (e.relu) v = v > 0.0f ? v : 0.0f;
        if (e.residual) v = v + e.residual[i * n + col];
        y[i * n + col] = v;
      }
    }
  }
}

bool cpuHasAvx512Vnni() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vnni");
  return has;
}

Int8IsaOverride int8IsaOverride() {
  const char *isa = std::getenv("TFMC_INT8_ISA");
  if (!isa || !*isa) return Int8IsaOverride::Auto;
  if (std::strcmp(isa, "vnni") == 0) return Int8IsaOverride::Vnni;
  if (std::strcmp(isa, "portable") == 0) return Int8IsaOverride::Portable;
  if (std::strcmp(isa, "f32") == 0) return Int8IsaOverride::F32;
  return Int8IsaOverride::Unknown;
}

bool cpuHasAmxInt8() {
  return int8IsaOverride() != Int8IsaOverride::Vnni && cpuHasAvx512Vnni() && amxAllowed("int8");
}

Int8Path int8Path() {
  switch (int8IsaOverride()) {
    case Int8IsaOverride::Portable: return Int8Path::Portable;
    case Int8IsaOverride::F32: return Int8Path::F32;
    default: return cpuHasAvx512Vnni() ? Int8Path::Vnni : Int8Path::F32;
  }
}

}  // namespace tfmrt::gemm::int8
