// tfm.fused_attention with precision "bf16" (tfm-lower-precision): the AVX-512 flash kernel's wide
// path with bf16 dot products (vdpbf16ps: two bf16 products per f32 lane, accumulated in f32).
// Scores and probabilities, the online softmax, the running max and sum and the output
// accumulator stay f32; only the operands of the two products are rounded to bf16 (nearest even):
//   scores  St[j][lane] += K[j][2p] Qt[2p][lane] + K[j][2p+1] Qt[2p+1][lane]
//   output  Ot[d][lane] += V[2p][d] P[2p][lane] + V[2p+1][d] P[2p+1][lane]
// so the layouts pair consecutive head_dim elements (Q tile, K rows: a K row in bf16 *is* its
// pairs) and consecutive visible keys (P tile, V rows interleaved two by two when packed).
//
// The task converts its visible K and V rows once into the per-thread pack buffer (the f32 path
// packs them to dodge cache-set conflicts; here the conversion is needed anyway and halves the
// bytes). Tasks the pack buffer cannot hold and odd head_dim or head_dim > 512 run the f32 kernel
// (taskAvx512). Every other tile runs here, also a last tile of 1-3 rows: on the f32 kernel such
// tiles made an encoder row's bits depend on how far its sequence was padded (--batch changed
// bf16 translations).
//
// Compiled with -mavx512bf16 (and the f32 kernel's flags); entered only after
// gemm::cpuHasAvx512Bf16() (attention_kernels.cpp). The same TU rules as attention_avx512.cpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/avx512_exp.h"

#include <cstdint>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_avx512_common.h"

namespace tfmrt {
namespace attention {
namespace {

// 16 floats -> their bf16 bits (nearest even) in the low half of each 32-bit lane.
inline __m512i bf16Lanes(__m512 x) { return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x)); }
// Lane-wise pairs: bf16(lo) in the low half, bf16(hi) in the high half (vdpbf16ps' operand order).
inline __m512i bf16Pairs(__m512 lo, __m512 hi) {
  return _mm512_or_si512(bf16Lanes(lo), _mm512_slli_epi32(bf16Lanes(hi), 16));
}

// 2^x for x <= 0 as exp2v, with a degree-3 polynomial: relative error 7.5e-5, 50x below the bf16
// rounding the probabilities get right after (2^-9), at 3 FMAs less per 16 scores. (Weighted
// least-squares fit of 2^f on |f| <= 1/2, coefficients rounded to f32; error checked on a grid.)
inline __m512 exp2Bf16(__m512 x) {
  const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-125.0f), _CMP_GE_OQ);
  x = _mm512_max_ps(x, _mm512_set1_ps(-127.0f));
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(0.05517132207751274f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.24261054396629333f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.6932609677314758f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.9999281167984009f));
  return _mm512_maskz_scalef_ps(live, p, n);
}

// The online-softmax step of a chunk (as softmaxChunk in the f32 kernel) that writes the
// probabilities straight into key pairs Pp[c][.] = (P[2c], P[2c+1]) (zero partner for an odd
// last key) instead of back into St.
template <int NV>
TFM_INLINE void softmaxPairsChunk(const float *St, uint32_t *Pp, int nk, const __m512 *mx, __m512 *m, __m512 *l,
                                  __m512 *alpha) {
  constexpr int64_t W = NV * kLanes;
  __m512 base[NV], sum[NV];
  newRunningMax<NV>(mx, m, base, alpha);
  for (int v = 0; v < NV; ++v) sum[v] = _mm512_setzero_ps();
  for (int c = 0; 2 * c < nk; ++c)
    for (int v = 0; v < NV; ++v) {
      const __m512 lo = exp2Bf16(_mm512_sub_ps(_mm512_load_ps(St + 2 * c * W + v * kLanes), base[v]));
      const __m512 hi = 2 * c + 1 < nk
                            ? exp2Bf16(_mm512_sub_ps(_mm512_load_ps(St + (2 * c + 1) * W + v * kLanes), base[v]))
                            : _mm512_setzero_ps();
      sum[v] = _mm512_add_ps(sum[v], _mm512_add_ps(lo, hi));
      _mm512_store_si512(Pp + c * W + v * kLanes, bf16Pairs(lo, hi));
    }
  for (int v = 0; v < NV; ++v) l[v] = _mm512_fmadd_ps(l[v], alpha[v], sum[v]);
}

// A task's visible keys, converted: K rows as bf16 [n][D] (D / 2 pairs each), V rows interleaved
// by pairs of keys, Vp[p][d] = (V[2p][d], V[2p+1][d]) as one 32-bit word (a zero partner for an
// odd last key).
struct Bf16Keys {
  const int32_t *idx;
  const uint32_t *k;  // [n][D / 2]
  const uint32_t *v;  // [(n + 1) / 2][D]
  int64_t n;
};

Bf16Keys packKeysBf16(const View &x, int64_t j0, int64_t j1, float *scratch, const ScratchLayout &lay) {
  int32_t *idx = reinterpret_cast<int32_t *>(scratch + lay.list);
  int64_t n = 0;
  for (int64_t j = maxI(j0, 0); j < j1; ++j)
    if (x.keep[j]) idx[n++] = int32_t(j);
  const int64_t D = x.D, half = D / 2;
  uint32_t *kp = reinterpret_cast<uint32_t *>(scratch + lay.pack);
  uint32_t *vp = kp + roundUp16(n * half);
  for (int64_t r = 0; r < n; ++r) {
    const float *kr = x.k + idx[r] * x.kW;
    uint32_t *kd = kp + r * half;
    // 32 floats -> 16 pairs at a time.
    for (int64_t c = 0; c < D; c += 2 * kLanes) {
      const __mmask16 lo = firstLanes(D - c), hi = firstLanes(D - c - kLanes > 0 ? D - c - kLanes : 0);
      const __m512 a = _mm512_maskz_loadu_ps(lo, kr + c), b = _mm512_maskz_loadu_ps(hi, kr + c + kLanes);
      const __m512i packed = (__m512i)_mm512_cvtne2ps_pbh(b, a);  // a's 16 bf16, then b's
      _mm512_mask_storeu_epi32(kd + c / 2, firstLanes((D - c) / 2), packed);
    }
  }
  for (int64_t p = 0; 2 * p < n; ++p) {
    const float *v0 = x.v + idx[2 * p] * x.vW;
    const float *v1 = 2 * p + 1 < n ? x.v + idx[2 * p + 1] * x.vW : nullptr;
    uint32_t *vd = vp + p * D;
    for (int64_t c = 0; c < D; c += kLanes) {
      const __mmask16 m = firstLanes(D - c);
      const __m512 a = _mm512_maskz_loadu_ps(m, v0 + c);
      const __m512 b = v1 ? _mm512_maskz_loadu_ps(m, v1 + c) : _mm512_setzero_ps();
      _mm512_mask_storeu_epi32(vd + c, m, bf16Pairs(a, b));
    }
  }
  return {idx, kp, vp, n};
}

// St[r][.] = K[r] . Qp for R keys (rows of `half` pairs); causal lanes get -inf.
template <int NV, int R>
TFM_INLINE void scoreBlockBf16(const uint32_t *Qp, const uint32_t *krows, int64_t half, float *St, const int32_t *idx,
                               bool needMask, int64_t firstRowLimit, __m512 *mx) {
  constexpr int64_t W = NV * kLanes;
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  int64_t p = 0;
  do {  // half >= 1
    __m512bh qv[NV];
    for (int v = 0; v < NV; ++v) qv[v] = (__m512bh)_mm512_load_si512(Qp + p * W + v * kLanes);
    for (int r = 0; r < R; ++r) {
      const __m512bh kb = (__m512bh)_mm512_set1_epi32(int(krows[r * half + p]));
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], kb, qv[v]);
    }
  } while (++p < half);
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) {
      __m512 s = acc[r][v];
      if (needMask) s = _mm512_mask_mov_ps(s, causalMask(idx[r], firstRowLimit, v), ninf);
      _mm512_store_ps(St + r * W + v * kLanes, s);
      mx[v] = _mm512_max_ps(mx[v], s);
    }
}

// Ot[d0 .. d0+RD)[.] = alpha * Ot + sum over key pairs of Vp[p][d] . Pp[p][.]
template <int NV, int RD>
TFM_INLINE void pvBlockBf16(float *Ot, const uint32_t *Pp, const uint32_t *vpairs, int pairs, int64_t D, int64_t d0,
                            const __m512 *alpha) {
  constexpr int64_t W = NV * kLanes;
  __m512 acc[RD][NV];
  for (int rd = 0; rd < RD; ++rd)
    for (int v = 0; v < NV; ++v) acc[rd][v] = _mm512_mul_ps(_mm512_load_ps(Ot + (d0 + rd) * W + v * kLanes), alpha[v]);
  int p = 0;
  do {  // pairs >= 1
    __m512bh pv[NV];
    for (int v = 0; v < NV; ++v) pv[v] = (__m512bh)_mm512_load_si512(Pp + p * W + v * kLanes);
    const uint32_t *vr = vpairs + p * D + d0;
    asm("" : "+r"(vr));  // as in the f32 kernel: displacements, not RD hoisted offsets
    for (int rd = 0; rd < RD; ++rd) {
      const __m512bh vb = (__m512bh)_mm512_set1_epi32(int(vr[rd]));
      for (int v = 0; v < NV; ++v) acc[rd][v] = _mm512_dpbf16_ps(acc[rd][v], vb, pv[v]);
    }
  } while (++p < pairs);
  for (int rd = 0; rd < RD; ++rd)
    for (int v = 0; v < NV; ++v) _mm512_store_ps(Ot + (d0 + rd) * W + v * kLanes, acc[rd][v]);
}

template <int NV, int N>
TFM_INLINE void scoreTailBf16(int n, const uint32_t *Qp, const uint32_t *krows, int64_t half, float *St,
                              const int32_t *idx, bool needMask, int64_t lim, __m512 *mx) {
  if constexpr (N > 0) {
    if (n == N) return scoreBlockBf16<NV, N>(Qp, krows, half, St, idx, needMask, lim, mx);
    scoreTailBf16<NV, N - 1>(n, Qp, krows, half, St, idx, needMask, lim, mx);
  }
}

template <int NV, int N>
TFM_INLINE void pvTailBf16(int n, float *Ot, const uint32_t *Pp, const uint32_t *vpairs, int pairs, int64_t D,
                           int64_t d0, const __m512 *alpha) {
  if constexpr (N > 0) {
    if (n == N) return pvBlockBf16<NV, N>(Ot, Pp, vpairs, pairs, D, d0, alpha);
    pvTailBf16<NV, N - 1>(n, Ot, Pp, vpairs, pairs, D, d0, alpha);
  }
}

template <int NV>
__attribute__((noinline)) void scoreChunkBf16(const uint32_t *Qp, const uint32_t *krows, const int32_t *idx, int nk,
                                              int64_t half, float *St, int64_t jAll, int64_t firstRowLimit,
                                              __m512 *maxOut) {
  constexpr int64_t W = NV * kLanes;
  constexpr int kR = 8;
  __m512 mx[NV];
  for (int v = 0; v < NV; ++v) mx[v] = maxOut[v];
  int r = 0;
  for (; r + kR <= nk; r += kR)
    scoreBlockBf16<NV, kR>(Qp, krows + r * half, half, St + r * W, idx + r, idx[r + kR - 1] >= jAll, firstRowLimit,
                           mx);
  if (r < nk)
    scoreTailBf16<NV, kR - 1>(nk - r, Qp, krows + r * half, half, St + r * W, idx + r, idx[nk - 1] >= jAll,
                              firstRowLimit, mx);
  for (int v = 0; v < NV; ++v) maxOut[v] = mx[v];
}

template <int NV>
__attribute__((noinline)) void pvChunkBf16(float *Ot, const uint32_t *Pp, const uint32_t *vpairs, int pairs,
                                           int64_t D, const __m512 *alpha) {
  constexpr int kRD = 16 / NV;
  int64_t d = 0;
  for (; d + kRD <= D; d += kRD) pvBlockBf16<NV, kRD>(Ot, Pp, vpairs, pairs, D, d, alpha);
  if (d < D) pvTailBf16<NV, kRD - 1>(int(D - d), Ot, Pp, vpairs, pairs, D, d, alpha);
}

// Rows [i0, i0 + rows) (1 <= rows <= 16 NV) against the task's visible keys. The
// scratch tiles are the f32 kernel's: Qt [D][W] (then its pairs in place), Ot [D][W],
// St [kKeyChunk][W] (scores, then the probabilities as key pairs, in place).
template <int NV>
void wideTaskBf16(const Params &p, const View &x, int64_t i0, int64_t rows, const Bf16Keys &keys, float *scratch,
                  const TaskOut &out) {
  constexpr int64_t W = NV * kLanes;
  const int64_t D = x.D, half = D / 2;
  float *Qt = scratch;
  float *Ot = Qt + D * W;
  float *St = Ot + D * W;
  uint32_t *Qp = reinterpret_cast<uint32_t *>(Qt);
  uint32_t *Pp = reinterpret_cast<uint32_t *>(St);

  packQueries<NV>(x.q + i0 * x.qW, x.qW, rows, D, p.scale * kLog2e, Qt);
  // Row pair (2c, 2c+1) -> row c, ascending: row c is written after rows 2c and 2c+1 were read.
  for (int64_t c = 0; c < half; ++c)
    for (int v = 0; v < NV; ++v)
      _mm512_store_si512(Qp + c * W + v * kLanes, bf16Pairs(_mm512_load_ps(Qt + 2 * c * W + v * kLanes),
                                                            _mm512_load_ps(Qt + (2 * c + 1) * W + v * kLanes)));
  for (int64_t e = 0; e < D * W; e += kLanes) _mm512_store_ps(Ot + e, _mm512_setzero_ps());

  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  __m512 m[NV], l[NV];
  for (int v = 0; v < NV; ++v) m[v] = ninf, l[v] = _mm512_setzero_ps();

  const int64_t firstRowLimit = i0 + (p.sk - p.sq);
  const int64_t jAll = p.causal ? firstRowLimit + 1 : p.sk;
  const int64_t nVis = visibleKeyCount(p, i0, rows, keys.idx, keys.n);

  for (int64_t r0 = 0; r0 < nVis; r0 += kKeyChunk) {  // r0 even: key pairs never straddle chunks
    const int nk = int(minI(kKeyChunk, nVis - r0));
    __m512 mx[NV], alpha[NV];
    for (int v = 0; v < NV; ++v) mx[v] = m[v];
    scoreChunkBf16<NV>(Qp, keys.k + r0 * half, keys.idx + r0, nk, half, St, jAll, firstRowLimit, mx);
    // Probabilities as key pairs, in place: pair c overwrites score rows <= 2c, already read.
    softmaxPairsChunk<NV>(St, Pp, nk, mx, m, l, alpha);
    const int pairs = (nk + 1) / 2;
    const uint32_t *vpairs = keys.v + (r0 / 2) * D;
    if ((nk & 1) && r0 + nk < keys.n) {
      // The last pair's partner is the next packed key, past this tile's causal limit: its
      // probability is 0, but an Inf or NaN value would still make 0 * v a NaN. That pair runs on
      // a copy of its value row with the partner's half cleared (in St's unused second half).
      uint32_t *last = Pp + (kKeyChunk / 2) * W;
      const uint32_t *src = vpairs + (pairs - 1) * D;
      for (int64_t c = 0; c < D; c += kLanes) {
        const __mmask16 cols = firstLanes(D - c);
        _mm512_mask_storeu_epi32(last + c, cols,
                                 _mm512_and_si512(_mm512_maskz_loadu_epi32(cols, src + c), _mm512_set1_epi32(0xFFFF)));
      }
      __m512 one[NV];
      for (int v = 0; v < NV; ++v) one[v] = _mm512_set1_ps(1.0f);
      if (pairs > 1) pvChunkBf16<NV>(Ot, Pp, vpairs, pairs - 1, D, alpha);
      pvChunkBf16<NV>(Ot, Pp + (pairs - 1) * W, last, 1, D, pairs > 1 ? one : alpha);
    } else {
      pvChunkBf16<NV>(Ot, Pp, vpairs, pairs, D, alpha);
    }
  }
  writeTile<NV>(Ot, D, rows, m, l, out);
}

}  // namespace

void taskAvx512Bf16(const Params &p, int64_t b, int64_t h, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                    float *scratch, const TaskOut &out) {
  const ScratchLayout lay = scratchLayout(p.headDim, j1 - j0);
  const int64_t rows = i1 - i0;
  // (head_dim <= 512: the copy of a value pair row in wideTaskBf16 fits the score tile's free half.
  // lay.packs depends on the task's key range, at most kSplitKeys keys unless a test forces
  // splits, so it holds for every head_dim up to 2048.)
  if (p.headDim % 2 != 0 || p.headDim > (kKeyChunk / 2) * kLanes || !lay.packs)
    return taskAvx512(p, b, h, i0, i1, j0, j1, scratch, out);
  const View x(p, b, h);
  const Bf16Keys keys = packKeysBf16(x, j0, j1, scratch, lay);
  for (int64_t t = 0; t < rows; t += kQueryTile) {
    const int64_t n = minI(kQueryTile, rows - t);
    const TaskOut sub{out.o + t * out.oStride, out.oStride, out.m ? out.m + t : nullptr, out.m ? out.l + t : nullptr};
    if (n <= kLanes) wideTaskBf16<1>(p, x, i0 + t, n, keys, scratch, sub);
    else wideTaskBf16<2>(p, x, i0 + t, n, keys, scratch, sub);
  }
}

}  // namespace attention
}  // namespace tfmrt
