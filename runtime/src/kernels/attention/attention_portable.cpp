// tfm.fused_attention, portable flash kernel: the same algorithm as attention_avx512.cpp (read
// that file's header for the why) in plain C++ that the compiler vectorises through
// `#pragma omp simd` at the baseline ISA. Used when the CPU lacks AVX-512 (or on request, see
// TFMRT_ATTENTION_IMPL) and tested against the reference on every build.
//
// Differences from the AVX-512 version: query tiles are processed 16 lanes at a time (a 32-row
// task is two passes over its keys), blocks are smaller (4 keys / 4 head_dim rows) so the
// accumulators fit 16 SSE registers, and exp2 builds 2^n through the exponent bits.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/attention/attention.h"
#include "kernels/cpu/cpu_util.h"

namespace tfmrt {
namespace attention {
namespace {

constexpr float kLog2e = 1.44269504088896340736f;
constexpr int64_t kW = 16;  // query lanes per wide pass
constexpr int kR = 4;       // keys per score block, head_dim rows per output block
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline float bitsToFloat(int32_t i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}

// 2^x for x <= 0; x < -125, -inf and NaN give exactly 0 (no denormal results). Same polynomial
// as the AVX-512 kernel; rounding by the 1.5 * 2^23 trick and 2^n via the exponent field, so it
// vectorises with SSE2.
#pragma omp declare simd
inline float exp2p(float x) {
  const bool live = x >= -125.0f;
  const float xc = live ? x : -125.0f;
  const float n = (xc + 12582912.0f) - 12582912.0f;
  const float f = xc - n;
  float p = 1.535336188319500e-4f;
  p = p * f + 1.339887440266574e-3f;
  p = p * f + 9.618437357674640e-3f;
  p = p * f + 5.550332471162809e-2f;
  p = p * f + 2.402264791363012e-1f;
  p = p * f + 6.931472028550421e-1f;
  p = p * f + 1.0f;
  const float scale = bitsToFloat((int32_t(n) + 127) << 23);
  return live ? p * scale : 0.0f;
}

// The visible keys of a task, ascending, gathered once per task into the scratch key list.
struct KeyList {
  const int32_t *idx;
  const float *const *krow;
  const float *const *vrow;
  int64_t n;
};

KeyList buildKeyList(const Params &p, int64_t b, int64_t h, int64_t j0, int64_t j1, float *scratch,
                     const ScratchLayout &lay) {
  int32_t *idx = reinterpret_cast<int32_t *>(scratch + lay.list);
  const int64_t capacity = j1 - j0;  // the layout's key count
  const float **krow = reinterpret_cast<const float **>(scratch + lay.list + (capacity + 15) / 16 * 16);
  const float **vrow = krow + capacity;
  const uint8_t *keep = p.keep + b * p.sk;
  int64_t n = 0;
  for (int64_t j = std::max<int64_t>(j0, 0); j < j1; ++j)
    if (keep[j]) {
      idx[n] = int32_t(j);
      krow[n] = p.kRow(b, j, h);
      vrow[n] = p.vRow(b, j, h);
      ++n;
    }
  return {idx, krow, vrow, n};
}

template <int R>
inline void scoreBlock(const float *Qt, const float *const *krow, const int32_t *idx, int64_t D, float *St,
                       bool needMask, int64_t firstRowLimit) {
  float acc[R][kW] = {};
  for (int64_t d = 0; d < D; ++d) {
    const float *qd = Qt + d * kW;
    for (int r = 0; r < R; ++r) {
      const float kv = krow[r][d];
#pragma omp simd
      for (int64_t l = 0; l < kW; ++l) acc[r][l] += kv * qd[l];
    }
  }
  for (int r = 0; r < R; ++r) {
    const int64_t hidden = needMask ? idx[r] - firstRowLimit : 0;  // lanes l < hidden cannot see the key
#pragma omp simd
    for (int64_t l = 0; l < kW; ++l) St[r * kW + l] = l < hidden ? kNegInf : acc[r][l];
  }
}

template <int R>
inline void pvBlock(float *Ot, const float *St, const float *const *vrow, int nk, int64_t d0, const float *alpha) {
  float acc[R][kW];
  for (int r = 0; r < R; ++r)
#pragma omp simd
    for (int64_t l = 0; l < kW; ++l) acc[r][l] = Ot[(d0 + r) * kW + l] * alpha[l];
  for (int j = 0; j < nk; ++j) {
    const float *pj = St + j * kW;
    for (int r = 0; r < R; ++r) {
      const float vb = vrow[j][d0 + r];
#pragma omp simd
      for (int64_t l = 0; l < kW; ++l) acc[r][l] += vb * pj[l];
    }
  }
  for (int r = 0; r < R; ++r)
#pragma omp simd
    for (int64_t l = 0; l < kW; ++l) Ot[(d0 + r) * kW + l] = acc[r][l];
}

// Rows [i0, i0 + rows), rows <= kW, vectorised over query lanes. Cloned for AVX2 / AVX-512
// (cpu_util.h): the lanes are query rows, so no clone reorders a sum (the AVX-512 one may fuse
// multiply-adds).
TFMRT_SIMD_CLONES void widePass(const Params &p, int64_t b, int64_t h, int64_t i0, int64_t rows, const KeyList &keys, float *scratch,
              const TaskOut &out) {
  const int64_t D = p.headDim;
  float *Qt = scratch, *Ot = Qt + D * kW, *St = Ot + D * kW;  // [D][kW], [D][kW], [kKeyChunk][kW]
  const float c = p.scale * kLog2e;
  for (int64_t r = 0; r < kW; ++r) {
    const float *qr = r < rows ? p.qRow(b, i0 + r, h) : nullptr;
    for (int64_t d = 0; d < D; ++d) Qt[d * kW + r] = qr ? qr[d] * c : 0.0f;
  }
  std::memset(Ot, 0, sizeof(float) * size_t(D * kW));
  float m[kW], l[kW], alpha[kW], base[kW], mx[kW], sum[kW];
  for (int64_t x = 0; x < kW; ++x) m[x] = kNegInf, l[x] = 0.0f;

  const int64_t shift = p.causalShift();
  const int64_t firstRowLimit = i0 + shift;
  const int64_t jAll = p.causal ? firstRowLimit + 1 : p.sk;
  // The list is ascending: cut it at the causal limit of the pass's last row.
  const int64_t nVis =
      p.causal ? std::lower_bound(keys.idx, keys.idx + keys.n, i0 + rows + shift) - keys.idx : keys.n;
  for (int64_t r0 = 0; r0 < nVis; r0 += kKeyChunk) {
    const int nk = int(std::min(kKeyChunk, nVis - r0));
    const int32_t *idx = keys.idx + r0;
    const float *const *krow = keys.krow + r0;
    const float *const *vrow = keys.vrow + r0;
    int r = 0;
    for (; r + kR <= nk; r += kR)
      scoreBlock<kR>(Qt, krow + r, idx + r, D, St + r * kW, idx[r + kR - 1] >= jAll, firstRowLimit);
    for (; r < nk; ++r) scoreBlock<1>(Qt, krow + r, idx + r, D, St + r * kW, idx[r] >= jAll, firstRowLimit);

#pragma omp simd
    for (int64_t x = 0; x < kW; ++x) mx[x] = m[x], sum[x] = 0.0f;
    for (int rr = 0; rr < nk; ++rr)
#pragma omp simd
      for (int64_t x = 0; x < kW; ++x) mx[x] = std::max(mx[x], St[rr * kW + x]);
#pragma omp simd
    for (int64_t x = 0; x < kW; ++x) {
      base[x] = mx[x] == kNegInf ? 0.0f : mx[x];  // nothing visible yet: exp2(-inf - 0) = 0
      alpha[x] = exp2p(m[x] - base[x]);
      m[x] = mx[x];
    }
    for (int rr = 0; rr < nk; ++rr)
#pragma omp simd
      for (int64_t x = 0; x < kW; ++x) {
        const float pr = exp2p(St[rr * kW + x] - base[x]);
        St[rr * kW + x] = pr;
        sum[x] += pr;
      }
#pragma omp simd
    for (int64_t x = 0; x < kW; ++x) l[x] = l[x] * alpha[x] + sum[x];

    int64_t d = 0;
    for (; d + kR <= D; d += kR) pvBlock<kR>(Ot, St, vrow, nk, d, alpha);
    for (; d < D; ++d) pvBlock<1>(Ot, St, vrow, nk, d, alpha);
  }
  for (int64_t r = 0; r < rows; ++r) {
    float *o = out.o + r * out.oStride;
    const float sc = out.m ? 1.0f : (l[r] > 0.0f ? 1.0f / l[r] : 0.0f);
    for (int64_t d = 0; d < D; ++d) o[d] = Ot[d * kW + r] * sc;
    if (out.m) out.m[r] = m[r], out.l[r] = l[r];
  }
}

}  // namespace

void taskPortable(const Params &p, int64_t b, int64_t h, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                  float *scratch, const TaskOut &out) {
  // Every pass is a wide one, also for 1-3 rows: a row's bits then do not depend on how far its
  // sequence is padded (attention_avx512.cpp says why).
  const int64_t rows = i1 - i0;
  const KeyList keys = buildKeyList(p, b, h, j0, j1, scratch, scratchLayout(p.headDim, j1 - j0));
  for (int64_t r0 = 0; r0 < rows; r0 += kW) {
    const TaskOut sub{out.o + r0 * out.oStride, out.oStride, out.m ? out.m + r0 : nullptr, out.m ? out.l + r0 : nullptr};
    widePass(p, b, h, i0 + r0, std::min(kW, rows - r0), keys, scratch, sub);
  }
}

}  // namespace attention
}  // namespace tfmrt
