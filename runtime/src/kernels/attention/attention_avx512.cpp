// tfm.fused_attention, AVX-512 flash kernel: one task = up to 32 query rows of one (batch, head)
// against a key range, with an online softmax over chunks of kKeyChunk visible keys.
//
// This TU is compiled with -mavx512f -mavx512vl -mavx512dq -mfma and is only entered after
// cpuHasAvx512() (attention_driver.cpp). It deliberately includes no C++ library header with
// inline code and calls no inline function of a shared header (kernels/avx512_exp.h is static, one
// copy per TU, and only AVX-512 TUs include it): an inline/template function
// instantiated here would be AVX-512 code that the linker may pick for the whole library (a
// SIGILL on older CPUs). `nm` of the object shows a single global symbol, taskAvx512.
//
// Vectorised over *query lanes*. The tile's queries are packed
// transposed, Qt[d][lane] (16 or 32 lanes), pre-multiplied by scale * log2(e) so the softmax runs on
// exp2. Then every product is "broadcast one element of a K or V row x a vector of 16 queries":
//   scores  St[j][lane] = sum_d K[j][d] * Qt[d][lane]          (K rows read in place)
//   output  Ot[d][lane] = alpha[lane] * Ot[d][lane] + sum_j V[j][d] * P[j][lane]   (V rows in place)
// so K and V are never packed or transposed (they may be a merged QKV buffer), the row max and
// row sum of the online softmax are vertical (lane-wise) max/add with no horizontal reductions,
// and Qt, St, Ot (8 KB each at head_dim 64) stay in L1. The B x H x Sq x Sk scores never exist.
//
// A task (several query tiles of one head) first lists its *visible* keys (key_keep = 1) and, when
// it has more than one tile, copies their K and V rows into contiguous per-thread buffers: in place,
// a head's rows are a column block of [B, S, W] rows W * 4 bytes apart (2 KB for W = 512), which
// map to a small fraction of the L1/L2 sets and kept evicting each other (S = 1024 ran at 60% of
// FMA peak instead of 80%). Padding keys and keys past the causal limit of a tile's last row cost
// nothing; only keys past the causal limit of the tile's *first* row need a per-lane -inf mask, so
// a chunk is never fully masked.
//
// Every tile takes this path, also a last tile of 1-3 rows (13-15 of 16 lanes idle): a row's
// bits then depend only on its own tile position, not on how far its sequence is padded. A
// separate one-row path (vectorised over head_dim, a tree sum) for such tiles rounded
// differently, so an encoder row's output changed with the longest source in its block, i.e.
// with --batch / --max-batch-tokens. Decoder steps (one query row) run cached_attention and
// gathered_attention, not this kernel.
//
// GCC 12 warns about _mm512_undefined_ps() inside its own masked intrinsics (a known false
// positive of -Wmaybe-uninitialized in avx512fintrin.h).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/avx512_exp.h"

#include <cstdint>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_avx512_common.h"

namespace tfmrt {
namespace attention {
namespace {

// Register blocks: R keys x NV query vectors (scores) and RD head_dim rows x NV query vectors
// (output), 16 accumulators each. They are inlined into the two per-chunk loops below, which are
// noinline on purpose: inlined into wideTask, GCC allocates registers for the whole chunk loop and
// spills accumulators of the hot loops (a store-forwarding chain per FMA).

// St[r][.] = K[idx[r]] . Qt for R keys; lanes that cannot see a key (causal) get -inf.
template <int NV, int R>
TFM_INLINE void scoreBlock(const float *Qt, const float *const *krow, int64_t D, float *St, const int32_t *idx,
                           bool needMask, int64_t firstRowLimit, __m512 *mx) {
  constexpr int64_t W = NV * kLanes;
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  int64_t d = 0;
  do {  // D >= 1
    __m512 qv[NV];
    for (int v = 0; v < NV; ++v) qv[v] = _mm512_load_ps(Qt + d * W + v * kLanes);
    for (int r = 0; r < R; ++r) {
      const __m512 kb = _mm512_set1_ps(krow[r][d]);
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(kb, qv[v], acc[r][v]);
    }
  } while (++d < D);
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) {
      __m512 s = acc[r][v];
      if (needMask) s = _mm512_mask_mov_ps(s, causalMask(idx[r], firstRowLimit, v), ninf);
      _mm512_store_ps(St + r * W + v * kLanes, s);
      mx[v] = _mm512_max_ps(mx[v], s);
    }
}

// Ot[d0 .. d0+RD)[.] = alpha * Ot + sum_r V[idx[r]][d] * P[r][.]
template <int NV, int RD>
TFM_INLINE void pvBlock(float *Ot, const float *St, const float *const *vrow, int nk, int64_t d0, const __m512 *alpha) {
  constexpr int64_t W = NV * kLanes;
  __m512 acc[RD][NV];
  for (int rd = 0; rd < RD; ++rd)
    for (int v = 0; v < NV; ++v) acc[rd][v] = _mm512_mul_ps(_mm512_load_ps(Ot + (d0 + rd) * W + v * kLanes), alpha[v]);
  int r = 0;
  do {  // nk >= 1
    __m512 pv[NV];
    for (int v = 0; v < NV; ++v) pv[v] = _mm512_load_ps(St + r * W + v * kLanes);
    const float *vr = vrow[r] + d0;
    // Opaque to the optimiser: otherwise it hoists the RD offsets (d0 + rd) * 4 into RD
    // registers (spilling them) instead of using vr + immediate displacements.
    asm("" : "+r"(vr));
    for (int rd = 0; rd < RD; ++rd) {
      const __m512 vb = _mm512_set1_ps(vr[rd]);
      for (int v = 0; v < NV; ++v) acc[rd][v] = _mm512_fmadd_ps(vb, pv[v], acc[rd][v]);
    }
  } while (++r < nk);
  for (int rd = 0; rd < RD; ++rd)
    for (int v = 0; v < NV; ++v) _mm512_store_ps(Ot + (d0 + rd) * W + v * kLanes, acc[rd][v]);
}

template <int NV, int N>
TFM_INLINE void scoreTail(int n, const float *Qt, const float *const *krow, int64_t D, float *St, const int32_t *idx,
                          bool needMask, int64_t lim, __m512 *mx) {
  if constexpr (N > 0) {
    if (n == N) return scoreBlock<NV, N>(Qt, krow, D, St, idx, needMask, lim, mx);
    scoreTail<NV, N - 1>(n, Qt, krow, D, St, idx, needMask, lim, mx);
  }
}

template <int NV, int N>
TFM_INLINE void pvTail(int n, float *Ot, const float *St, const float *const *vrow, int nk, int64_t d0,
                       const __m512 *alpha) {
  if constexpr (N > 0) {
    if (n == N) return pvBlock<NV, N>(Ot, St, vrow, nk, d0, alpha);
    pvTail<NV, N - 1>(n, Ot, St, vrow, nk, d0, alpha);
  }
}

// Scores of one chunk of nk >= 1 visible keys: blocks of 8 keys (8 x NV accumulators). maxOut
// (in/out, NV vectors) is raised to the chunk's lane-wise maximum.
template <int NV>
__attribute__((noinline)) void scoreChunk(const float *Qt, const float *const *krow, const int32_t *idx, int nk,
                                          int64_t D, float *St, int64_t jAll, int64_t firstRowLimit, __m512 *maxOut) {
  constexpr int64_t W = NV * kLanes;
  constexpr int kR = 8;
  __m512 mx[NV];
  for (int v = 0; v < NV; ++v) mx[v] = maxOut[v];
  int r = 0;
  for (; r + kR <= nk; r += kR)
    scoreBlock<NV, kR>(Qt, krow + r, D, St + r * W, idx + r, idx[r + kR - 1] >= jAll, firstRowLimit, mx);
  if (r < nk)
    scoreTail<NV, kR - 1>(nk - r, Qt, krow + r, D, St + r * W, idx + r, idx[nk - 1] >= jAll, firstRowLimit, mx);
  for (int v = 0; v < NV; ++v) maxOut[v] = mx[v];
}

// Output update of one chunk: blocks of 16 / NV head_dim rows (16 accumulators).
template <int NV>
__attribute__((noinline)) void pvChunk(float *Ot, const float *St, const float *const *vrow, int nk, int64_t D,
                                       const __m512 *alpha) {
  constexpr int kRD = 16 / NV;
  int64_t d = 0;
  for (; d + kRD <= D; d += kRD) pvBlock<NV, kRD>(Ot, St, vrow, nk, d, alpha);
  if (d < D) pvTail<NV, kRD - 1>(int(D - d), Ot, St, vrow, nk, d, alpha);
}

// The visible keys of a task, ascending: key index and K / V row (in place or packed).
struct KeyList {
  const int32_t *idx;
  const float *const *krow;
  const float *const *vrow;
  int64_t n;
};


// Gathers the visible keys of [j0, j1) into the scratch key list; with `pack`, also copies their
// K and V rows into contiguous [n][roundUp16(D)] buffers (see kPackMaxBytes).
KeyList buildKeyList(const View &x, int64_t capacity, int64_t j0, int64_t j1, float *scratch, const ScratchLayout &lay,
                     bool pack) {
  int32_t *idx = reinterpret_cast<int32_t *>(scratch + lay.list);
  const float **krow = reinterpret_cast<const float **>(scratch + lay.list + roundUp16(capacity));
  const float **vrow = krow + capacity;
  const int64_t D = x.D, Dp = roundUp16(D);
  float *kp = scratch + lay.pack, *vp = kp + capacity * Dp;
  int64_t n = 0;
  for (int64_t j = maxI(j0, 0); j < j1; ++j) {
    if (!x.keep[j]) continue;
    idx[n] = int32_t(j);
    const float *kr = x.k + j * x.kW, *vr = x.v + j * x.vW;
    if (pack) {
      float *kd = kp + n * Dp, *vd = vp + n * Dp;
      for (int64_t c = 0; c < D; c += kLanes) {
        const __mmask16 m = firstLanes(D - c);
        _mm512_store_ps(kd + c, _mm512_maskz_loadu_ps(m, kr + c));
        _mm512_store_ps(vd + c, _mm512_maskz_loadu_ps(m, vr + c));
      }
      kr = kd;
      vr = vd;
    }
    krow[n] = kr;
    vrow[n] = vr;
    ++n;
  }
  return {idx, krow, vrow, n};
}

// Rows [i0, i0 + rows) (1 <= rows <= 16 NV) against the task's visible keys.
template <int NV>
void wideTask(const Params &p, const View &x, int64_t i0, int64_t rows, const KeyList &keys, float *scratch,
              const TaskOut &out) {
  constexpr int64_t W = NV * kLanes;
  const int64_t D = x.D;
  float *Qt = scratch;         // [D][W]
  float *Ot = Qt + D * W;      // [D][W]
  float *St = Ot + D * W;      // [kKeyChunk][W]: scores, then probabilities

  packQueries<NV>(x.q + i0 * x.qW, x.qW, rows, D, p.scale * kLog2e, Qt);
  for (int64_t e = 0; e < D * W; e += kLanes) _mm512_store_ps(Ot + e, _mm512_setzero_ps());

  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  __m512 m[NV], l[NV];
  for (int v = 0; v < NV; ++v) m[v] = ninf, l[v] = _mm512_setzero_ps();

  // Keys >= jAll are visible to only some lanes of the tile.
  const int64_t firstRowLimit = i0 + (p.sk - p.sq);
  const int64_t jAll = p.causal ? firstRowLimit + 1 : p.sk;
  const int64_t nVis = visibleKeyCount(p, i0, rows, keys.idx, keys.n);

  for (int64_t r0 = 0; r0 < nVis; r0 += kKeyChunk) {
    const int nk = int(minI(kKeyChunk, nVis - r0));
    const int32_t *idx = keys.idx + r0;
    const float *const *krow = keys.krow + r0;
    const float *const *vrow = keys.vrow + r0;
    __m512 mx[NV], alpha[NV];
    for (int v = 0; v < NV; ++v) mx[v] = m[v];
    scoreChunk<NV>(Qt, krow, idx, nk, D, St, jAll, firstRowLimit, mx);
    // Online softmax: new running max, rescale factor for the old state, probabilities in place.
    softmaxChunk<NV>(St, nk, mx, m, l, alpha);
    pvChunk<NV>(Ot, St, vrow, nk, D, alpha);
  }
  writeTile<NV>(Ot, D, rows, m, l, out);
}

}  // namespace

void taskAvx512(const Params &p, int64_t b, int64_t h, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                float *scratch, const TaskOut &out) {
  const int64_t rows = i1 - i0;
  const View x(p, b, h);
  const ScratchLayout lay = scratchLayout(p.headDim, j1 - j0);
  // Packing costs one read + write of the K/V rows: worth it once several tiles reuse them.
  const KeyList keys = buildKeyList(x, j1 - j0, j0, j1, scratch, lay, lay.packs && rows > kQueryTile);
  for (int64_t t = 0; t < rows; t += kQueryTile) {
    const int64_t n = minI(kQueryTile, rows - t);
    const TaskOut sub{out.o + t * out.oStride, out.oStride, out.m ? out.m + t : nullptr, out.m ? out.l + t : nullptr};
    if (n <= kLanes) wideTask<1>(p, x, i0 + t, n, keys, scratch, sub);
    else wideTask<2>(p, x, i0 + t, n, keys, scratch, sub);
  }
}

}  // namespace attention
}  // namespace tfmrt
