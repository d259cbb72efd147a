// GEMM for few rows on a weight packed once into 64-column panels: the decoder's per-step
// products (M = hypotheses, 1..~256) where oneDNN 2.6's run-time-M gemm:jit spends more time in
// its driver and threading than in FMAs (measured in bench/gemm_bench.cpp).
//
//   y[m, n] = act(x[m, :] . B[:, n] + bias[n]) + residual[m, n],   act = identity or relu
//
// Packed layout: panel p holds columns [64p, 64p + 64) of B as packed[p][kk][0..64), zero past N,
// so the inner loop reads one contiguous 256-byte row per kk and four 16-lane vectors cover it.
// The AVX-512 body computes 6 x 64 output blocks (24 accumulators) over the whole K; each output
// element is one dot product in kk order, independent of thread count and panel split.
#pragma once

#include <cstdint>
#include <string>

namespace tfmrt::gemm {

constexpr int64_t kPanelCols = 64;
// The AVX2 body's panels are 16 columns wide (two ymm): its 6 x 16 blocks then read each panel
// as one sequential stream (64 bytes per kk), where 16-column slices of 64-column panels were
// four interleaved streams of 64 bytes every 256.
constexpr int64_t kAvx2PanelCols = 16;

inline int64_t panelCount(int64_t n, int64_t width = kPanelCols) { return (n + width - 1) / width; }
inline int64_t packedFloats(int64_t k, int64_t n, int64_t width = kPanelCols) { return panelCount(n, width) * k * width; }

// `w` is B^T, [N, K] row-major, when `transposed` (a linear's weight in PyTorch's layout), else
// B itself, [K, N] row-major. Panels of `width` columns (kPanelCols, or kAvx2PanelCols).
void packPanels(const float *w, int64_t k, int64_t n, bool transposed, float *packed, int64_t width = kPanelCols);

struct Epilogue {
  const float *bias = nullptr;      // [N] or null
  const float *residual = nullptr;  // [M, N] or null (may equal y)
  bool relu = false;                // applied before the residual is added
};

// Rows [0, m) and panels [p0, p1) of y [m, n]; x is [m, k] row-major.
void gemmPanelsAvx512(const float *x, int64_t m, int64_t k, const float *packed, int64_t n, int64_t p0, int64_t p1,
                      const Epilogue &e, float *y);
// The same on AVX2 + FMA over panels of kAvx2PanelCols (p0, p1 count those): 6 x 16 blocks, the
// same bits as the AVX-512 body. Enter only after attention::cpuHasAvx2Fma().
void gemmPanelsAvx2(const float *x, int64_t m, int64_t k, const float *packed, int64_t n, int64_t p0, int64_t p1,
                    const Epilogue &e, float *y);
// The plain loops the AVX-512 and AVX2 bodies are tested against (panels of `width` columns,
// double accumulation).
void gemmPanelsReference(const float *x, int64_t m, int64_t k, const float *packed, int64_t n, int64_t p0, int64_t p1,
                         const Epilogue &e, float *y, int64_t width = kPanelCols);

// --- bf16 (weight_layout = "packed_bf16") --------------------------------------------------------
// The same panels with bf16 elements in pairs of consecutive k, as vdpbf16ps reads them: panel p
// holds packed[p][kp][j][e] = bf16(B[2 kp + e][64 p + j]), zero past K and N; x is converted to
// bf16 pairs per row (xPairs[i][kp] = x[i][2 kp] | x[i][2 kp + 1] << 16). Products of bf16
// values are exact in f32 and summed in f32: only the operands are rounded (to nearest even).
inline int64_t pairCount(int64_t k) { return (k + 1) / 2; }
inline int64_t packedBf16Elements(int64_t k, int64_t n) { return panelCount(n) * pairCount(k) * kPanelCols * 2; }
uint16_t floatToBf16(float v);  // round to nearest even; NaN stays NaN
float bf16ToFloat(uint16_t v);
void packPanelsBf16(const float *w, int64_t k, int64_t n, bool transposed, uint16_t *packed);
void toBf16PairsReference(const float *x, int64_t m, int64_t k, uint32_t *pairs);
// True when the CPU has AVX512-BF16 (and the AVX-512 base the f32 path needs).
bool cpuHasAvx512Bf16();
// Whether ONEDNN_MAX_CPU_ISA allows `level` ("AVX512_CORE_BF16" or "AVX512_CORE_AMX"), read as
// oneDNN 2.6 reads it (the cap both cpuHasAvx512Bf16 and amxAllowed apply before asking the CPU).
bool isaCapAllows(const std::string &level);
void toBf16PairsAvx512Bf16(const float *x, int64_t m, int64_t k, uint32_t *pairs);
// x[0, count) -> bf16 in place order (nearest even), threads over chunks: the operands of oneDNN's
// bf16 GEMMs. Needs cpuHasAvx512Bf16().
void toBf16(const float *x, int64_t count, uint16_t *out);
void gemmPanelsBf16Avx512Bf16(const uint32_t *xPairs, int64_t m, int64_t k, const uint16_t *packed, int64_t n,
                              int64_t p0, int64_t p1, const Epilogue &e, float *y);
// AMX (Intel Sapphire Rapids and later): the same panels and pairs through tile instructions.
// cpuHasAmxBf16() is true when the CPU has AMX-BF16, ONEDNN_MAX_CPU_ISA (if set) allows
// AVX512_CORE_AMX, and Linux granted this process the tile state (asked once, on the first call).
// The body needs pairCount(k) % 16 == 0 (amxFits: k a multiple of 32, as every model dimension
// is); other products stay on the AVX512-BF16 body. Its sums run in the tiles' order, so its
// results differ from that body's in the last bits.
bool cpuHasAmxBf16();
// The tile state granted and the CPU's AMX `feature` ("bf16" or "int8"), under the same ISA cap.
bool amxAllowed(const char *feature);
inline bool amxFits(int64_t k) { return k > 0 && pairCount(k) % 16 == 0; }
void gemmPanelsBf16Amx(const uint32_t *xPairs, int64_t m, int64_t k, const uint16_t *packed, int64_t n, int64_t p0,
                       int64_t p1, const Epilogue &e, float *y);
void gemmPanelsBf16Reference(const uint32_t *xPairs, int64_t m, int64_t k, const uint16_t *packed, int64_t n,
                             int64_t p0, int64_t p1, const Epilogue &e, float *y);

}  // namespace tfmrt::gemm
