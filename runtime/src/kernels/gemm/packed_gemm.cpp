// Packing and the reference body of the packed small-M GEMM (packed_gemm.h).
#include "kernels/gemm/packed_gemm.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include <sys/syscall.h>
#include <unistd.h>

namespace tfmrt::gemm {

void packPanels(const float *w, int64_t k, int64_t n, bool transposed, float *packed, int64_t width) {
  const int64_t panels = panelCount(n, width);
  for (int64_t p = 0; p < panels; ++p) {
    float *out = packed + p * k * width;
    const int64_t c0 = p * width, cols = std::min(width, n - c0);
    if (transposed) {
      // 64 x 64 tiles: 64 contiguous reads of each weight row, written `width` floats apart within
      // a tile (in L1). Element-by-element over the whole panel was ~0.25 GB/s at 32000 x 512.
      // Only a last, narrower panel has columns to zero (the whole panel was filled first: most of
      // the packing time of a one-line translation).
      if (cols < width)
        for (int64_t kk = 0; kk < k; ++kk) std::fill(out + kk * width + cols, out + (kk + 1) * width, 0.0f);
      for (int64_t k0 = 0; k0 < k; k0 += 64) {
        const int64_t k1 = std::min(k, k0 + 64);
        for (int64_t j = 0; j < cols; ++j) {
          const float *row = w + (c0 + j) * k;
          for (int64_t kk = k0; kk < k1; ++kk) out[kk * width + j] = row[kk];
        }
      }
    } else {
      for (int64_t kk = 0; kk < k; ++kk) {
        std::copy(w + kk * n + c0, w + kk * n + c0 + cols, out + kk * width);
        std::fill(out + kk * width + cols, out + (kk + 1) * width, 0.0f);
      }
    }
  }
}

void toBf16(const float *x, int64_t count, uint16_t *out) {
  constexpr int64_t kChunk = int64_t(1) << 15;  // even: every chunk but the last is whole pairs
#pragma omp parallel for schedule(static) if (count >= 4 * kChunk)
  for (int64_t c = 0; c < count; c += kChunk) {
    const int64_t len = std::min(kChunk, count - c), even = len & ~int64_t(1);
    if (even) toBf16PairsAvx512Bf16(x + c, 1, even, reinterpret_cast<uint32_t *>(out + c));
    if (len != even) out[c + even] = floatToBf16(x[c + even]);
  }
}

void gemmPanelsReference(const float *x, int64_t m, int64_t k, const float *packed, int64_t n, int64_t p0, int64_t p1,
                         const Epilogue &e, float *y, int64_t width) {
  for (int64_t p = p0; p < p1; ++p) {
    const float *panel = packed + p * k * width;
    const int64_t c0 = p * width, cols = std::min(width, n - c0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        double acc = 0;
        for (int64_t kk = 0; kk < k; ++kk) acc += double(x[i * k + kk]) * double(panel[kk * width + j]);
        float v = float(acc) + (e.bias ? e.bias[c0 + j] : 0.0f);
        if (e.relu) v = std::max(v, 0.0f);
        if (e.residual) v += e.residual[i * n + c0 + j];
        y[i * n + c0 + j] = v;
      }
  }
}

uint16_t floatToBf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((bits >> 16) | 0x40u);  // quiet NaN
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

float bf16ToFloat(uint16_t v) {
  const uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

void packPanelsBf16(const float *w, int64_t k, int64_t n, bool transposed, uint16_t *packed) {
  const int64_t panels = panelCount(n), pairs = pairCount(k);
  for (int64_t p = 0; p < panels; ++p) {
    uint16_t *out = packed + p * pairs * kPanelCols * 2;
    const int64_t c0 = p * kPanelCols, cols = std::min(kPanelCols, n - c0);
    std::fill(out, out + pairs * kPanelCols * 2, uint16_t(0));
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t kk = 0; kk < k; ++kk) {
        const float v = transposed ? w[(c0 + j) * k + kk] : w[kk * n + c0 + j];
        out[((kk / 2) * kPanelCols + j) * 2 + (kk % 2)] = floatToBf16(v);
      }
  }
}

void toBf16PairsReference(const float *x, int64_t m, int64_t k, uint32_t *pairs) {
  const int64_t kp = pairCount(k);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < kp; ++p) {
      const uint32_t lo = floatToBf16(x[i * k + 2 * p]);
      const uint32_t hi = 2 * p + 1 < k ? floatToBf16(x[i * k + 2 * p + 1]) : 0u;
      pairs[i * kp + p] = lo | (hi << 16);
    }
}

// Whether ONEDNN_MAX_CPU_ISA allows `level` (AVX512_CORE_BF16 or AVX512_CORE_AMX), read as oneDNN
// 2.6 reads it: one of its names, any case, caps the ISA; unset, empty or a name it does not know
// leaves it uncapped (a cap we applied where oneDNN did not turned bf16 off with a notice that
// blamed the CPU). Its names are bit sets (dnnl_types.h), a level allowed when the cap holds all
// of its bits.
bool isaCapAllows(const std::string &level) {
  static const std::pair<const char *, unsigned> kIsas[] = {
      {"SSE41", 0x1},         {"AVX", 0x3},           {"AVX2", 0x7},          {"AVX512_MIC", 0xf},
      {"AVX512_MIC_4OPS", 0x1f}, {"AVX512_CORE", 0x27}, {"AVX512_CORE_VNNI", 0x67}, {"AVX512_CORE_BF16", 0xe7},
      {"AVX512_CORE_AMX", 0x3e7}, {"AVX2_VNNI", 0x407}, {"ALL", 0xffffffffu}};
  auto bits = [&](const std::string &name) -> unsigned {
    for (const auto &[n, b] : kIsas)
      if (name == n) return b;
    return 0;
  };
  const char *cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (!cap) return true;
  std::string isa(cap);
  for (char &c : isa) c = char(std::toupper(static_cast<unsigned char>(c)));
  const unsigned capBits = bits(isa), want = bits(level);
  return capBits == 0 || (capBits & want) == want;
}

bool cpuHasAvx512Bf16() {
  // ONEDNN_MAX_CPU_ISA caps oneDNN's kernels; our dispatch follows it, so one variable tests the
  // fallback of both.
  if (!isaCapAllows("AVX512_CORE_BF16")) return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
}

bool amxAllowed(const char *feature) {
  if (!isaCapAllows("AVX512_CORE_AMX")) return false;
  // Linux hands out the tile state (8 KB per thread's context) only on request, once per process;
  // without it the first tile instruction would kill the process with SIGILL.
  static const bool granted = [] {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("amx-tile")) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  if (!granted) return false;
  if (std::strcmp(feature, "bf16") == 0) return __builtin_cpu_supports("amx-bf16");
  if (std::strcmp(feature, "int8") == 0) return __builtin_cpu_supports("amx-int8");
  return false;
}

bool cpuHasAmxBf16() { return amxAllowed("bf16") && cpuHasAvx512Bf16(); }

void gemmPanelsBf16Reference(const uint32_t *xPairs, int64_t m, int64_t k, const uint16_t *packed, int64_t n,
                             int64_t p0, int64_t p1, const Epilogue &e, float *y) {
  const int64_t kp = pairCount(k);
  for (int64_t p = p0; p < p1; ++p) {
    const uint16_t *panel = packed + p * kp * kPanelCols * 2;
    const int64_t c0 = p * kPanelCols, cols = std::min(kPanelCols, n - c0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < kp; ++q) {
          const uint32_t xv = xPairs[i * kp + q];
          acc += double(bf16ToFloat(uint16_t(xv & 0xFFFFu))) * double(bf16ToFloat(panel[(q * kPanelCols + j) * 2])) +
                 double(bf16ToFloat(uint16_t(xv >> 16))) * double(bf16ToFloat(panel[(q * kPanelCols + j) * 2 + 1]));
        }
        float v = float(acc) + (e.bias ? e.bias[c0 + j] : 0.0f);
        if (e.relu) v = std::max(v, 0.0f);
        if (e.residual) v += e.residual[i * n + c0 + j];
        y[i * n + c0 + j] = v;
      }
  }
}

}  // namespace tfmrt::gemm
