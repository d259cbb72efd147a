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
// Wide path (>= kMinWideRows rows): vectorised over *query lanes*. The tile's queries are packed
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
// Row path (< kMinWideRows rows, e.g. Sq = 1 decoding): one query row at a time, vectorised over
// head_dim: 16 dot products at a time reduced together (reduce16), exp2 over the chunk's scores,
// then acc += p_j * V[j] with q and acc in registers (head_dim = 16..128 in steps of 16; a generic
// loop otherwise). Memory-bound on K/V: each K/V element is used once per query row.
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

// Gathers up to kKeyChunk visible keys from [j, jEnd) into idx; advances j. Returns the count.
inline int gatherKeys(const uint8_t *keep, int64_t &j, int64_t jEnd, int32_t *idx) {
  int n = 0;
  for (; j < jEnd && n < kKeyChunk; ++j)
    if (keep[j]) idx[n++] = int32_t(j);
  return n;
}

// ---- wide path ------------------------------------------------------------------------------

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


// One online-softmax step for a query row over its nk (>= 1) visible scores s[0, nk) in the log2
// domain: vmax holds the running max and the new scores' max lanes. Replaces the scores by their
// exponentials against the new max, updates the running max m and sum l, and returns the factor
// the row's accumulator must be rescaled by.
inline float onlineSoftmaxStep(float *s, int nk, __m512 vmax, float &m, float &l) {
  const float mNew = _mm512_reduce_max_ps(vmax);  // finite: nk >= 1 visible keys
  const float alpha = _mm_cvtss_f32(_mm512_castps512_ps128(exp2v(_mm512_set1_ps(m - mNew))));
  m = mNew;
  __m512 vsum = _mm512_setzero_ps();
  const __m512 vm = _mm512_set1_ps(mNew);
  for (int r = 0; r < nk; r += kLanes) {
    const __mmask16 k = firstLanes(nk - r);
    const __m512 pr = _mm512_maskz_mov_ps(k, exp2v(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + r), vm)));
    _mm512_mask_storeu_ps(s + r, k, pr);
    vsum = _mm512_add_ps(vsum, pr);
  }
  l = l * alpha + _mm512_reduce_add_ps(vsum);
  return alpha;
}

// Gathers the visible keys of [j0, j1) into the scratch key list; with `pack`, also copies their
// K and V rows into contiguous [n][roundUp16(D)] buffers (see kPackMaxBytes).
KeyList buildKeyList(const View &x, int64_t sk, int64_t j0, int64_t j1, float *scratch, const ScratchLayout &lay,
                     bool pack) {
  int32_t *idx = reinterpret_cast<int32_t *>(scratch + lay.list);
  const float **krow = reinterpret_cast<const float **>(scratch + lay.list + roundUp16(sk));
  const float **vrow = krow + sk;
  const int64_t D = x.D, Dp = roundUp16(D);
  float *kp = scratch + lay.pack, *vp = kp + sk * Dp;
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

// Rows [i0, i0 + rows) (kMinWideRows <= rows <= 16 NV) against the task's visible keys.
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

// ---- row path -------------------------------------------------------------------------------

// Horizontal sums of 16 vectors at once: out[k] = sum of v[k]'s lanes. 45 shuffles/adds for 16
// dot products instead of ~8 per _mm512_reduce_add_ps.
inline __m512 reduce16(const __m512 *v) {
  __m512 t[4];
  for (int g = 0; g < 4; ++g) {
    __m512 s[2];
    for (int pr = 0; pr < 2; ++pr) {
      const __m512 a = v[4 * g + 2 * pr], b = v[4 * g + 2 * pr + 1];
      // Per 128-bit lane: a0+a2, b0+b2, a1+a3, b1+b3.
      s[pr] = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    }
    // Per 128-bit lane: partial sums of v[4g], v[4g+1], v[4g+2], v[4g+3].
    t[g] = _mm512_add_ps(_mm512_shuffle_ps(s[0], s[1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(s[0], s[1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // Across 128-bit lanes: pairs of lanes, then the remaining pairs.
  const __m512 w01 = _mm512_add_ps(_mm512_shuffle_f32x4(t[0], t[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(t[0], t[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 w23 = _mm512_add_ps(_mm512_shuffle_f32x4(t[2], t[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(t[2], t[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w01, w23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(w01, w23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// One query row with head_dim = 16 ND (ND <= 8: head_dim 16 ... 128): q and the output
// accumulator live in registers for the whole key range; scores 16 keys at a time.
template <int ND>
void rowTaskFixed(const Params &p, int64_t b, int64_t h, int64_t i, int64_t j0, int64_t j1, float *scratch,
                  float *o, float *mOut, float *lOut) {
  const View x(p, b, h);
  float *s = scratch;                                       // [kKeyChunk] scores, then probabilities
  int32_t *idx = reinterpret_cast<int32_t *>(s + kKeyChunk);  // [kKeyChunk]
  const __m512 c = _mm512_set1_ps(p.scale * kLog2e);
  __m512 qv[ND], acc[2][ND];
  for (int ch = 0; ch < ND; ++ch) {
    qv[ch] = _mm512_mul_ps(_mm512_loadu_ps(x.q + i * x.qW + ch * kLanes), c);
    acc[0][ch] = acc[1][ch] = _mm512_setzero_ps();
  }
  float m = -__builtin_inff(), l = 0.0f;
  const int64_t jEnd = p.causal ? minI(j1, i + (p.sk - p.sq) + 1) : j1;
  int64_t j = maxI(j0, 0);
  while (j < jEnd) {
    const int nk = gatherKeys(x.keep, j, jEnd, idx);  // all visible: no masking in this path
    if (nk == 0) break;
    __m512 vmax = _mm512_set1_ps(m);
    for (int r = 0; r < nk; r += kLanes) {
      const int n = nk - r < kLanes ? nk - r : int(kLanes);
      __m512 dot[kLanes];
      for (int e = 0; e < kLanes; ++e) {
        const float *kr = x.k + int64_t(idx[r + (e < n ? e : 0)]) * x.kW;  // lanes past n: a dummy key
        __m512 a = _mm512_mul_ps(_mm512_loadu_ps(kr), qv[0]);
        for (int ch = 1; ch < ND; ++ch) a = _mm512_fmadd_ps(_mm512_loadu_ps(kr + ch * kLanes), qv[ch], a);
        dot[e] = a;
      }
      const __mmask16 k = __mmask16((1u << n) - 1u);
      const __m512 sc = reduce16(dot);
      _mm512_mask_storeu_ps(s + r, k, sc);
      vmax = _mm512_mask_max_ps(vmax, k, vmax, sc);
    }
    const float alpha = onlineSoftmaxStep(s, nk, vmax, m, l);
    const __m512 va = _mm512_set1_ps(alpha);
    for (int ch = 0; ch < ND; ++ch) {
      acc[0][ch] = _mm512_mul_ps(acc[0][ch], va);
      acc[1][ch] = _mm512_mul_ps(acc[1][ch], va);
    }
    int r = 0;
    for (; r + 2 <= nk; r += 2) {  // two accumulator sets hide the FMA latency at small ND
      const float *v0 = x.v + int64_t(idx[r]) * x.vW, *v1 = x.v + int64_t(idx[r + 1]) * x.vW;
      const __m512 p0 = _mm512_set1_ps(s[r]), p1 = _mm512_set1_ps(s[r + 1]);
      for (int ch = 0; ch < ND; ++ch) {
        acc[0][ch] = _mm512_fmadd_ps(p0, _mm512_loadu_ps(v0 + ch * kLanes), acc[0][ch]);
        acc[1][ch] = _mm512_fmadd_ps(p1, _mm512_loadu_ps(v1 + ch * kLanes), acc[1][ch]);
      }
    }
    if (r < nk) {
      const float *v0 = x.v + int64_t(idx[r]) * x.vW;
      const __m512 p0 = _mm512_set1_ps(s[r]);
      for (int ch = 0; ch < ND; ++ch) acc[0][ch] = _mm512_fmadd_ps(p0, _mm512_loadu_ps(v0 + ch * kLanes), acc[0][ch]);
    }
  }
  const __m512 vinv = _mm512_set1_ps(mOut ? 1.0f : (l > 0.0f ? 1.0f / l : 0.0f));
  for (int ch = 0; ch < ND; ++ch)
    _mm512_storeu_ps(o + ch * kLanes, _mm512_mul_ps(_mm512_add_ps(acc[0][ch], acc[1][ch]), vinv));
  if (mOut) *mOut = m, *lOut = l;
}

// Any head_dim: chunks of 16 with a masked tail, accumulator in scratch.
void rowTask(const Params &p, int64_t b, int64_t h, int64_t i, int64_t j0, int64_t j1, float *scratch, float *o,
             float *mOut, float *lOut) {
  const View x(p, b, h);
  const int64_t D = x.D, nd = (D + kLanes - 1) / kLanes;
  const __mmask16 tail = __mmask16(D % kLanes ? (1u << (D % kLanes)) - 1u : 0xFFFFu);
  auto maskOf = [&](int64_t c) { return c == nd - 1 ? tail : __mmask16(0xFFFF); };
  float *qs = scratch;             // [nd * 16], zero padded
  float *acc = qs + nd * kLanes;   // [nd * 16]
  float *s = acc + nd * kLanes;    // [kKeyChunk]
  int32_t *idx = reinterpret_cast<int32_t *>(s + kKeyChunk);

  const __m512 c = _mm512_set1_ps(p.scale * kLog2e);
  for (int64_t ch = 0; ch < nd; ++ch) {
    _mm512_store_ps(qs + ch * kLanes, _mm512_mul_ps(_mm512_maskz_loadu_ps(maskOf(ch), x.q + i * x.qW + ch * kLanes), c));
    _mm512_store_ps(acc + ch * kLanes, _mm512_setzero_ps());
  }
  float m = -__builtin_inff(), l = 0.0f;
  const int64_t jEnd = p.causal ? minI(j1, i + (p.sk - p.sq) + 1) : j1;
  int64_t j = maxI(j0, 0);
  while (j < jEnd) {
    const int nk = gatherKeys(x.keep, j, jEnd, idx);
    if (nk == 0) break;
    for (int r = 0; r < nk; ++r) {  // every gathered key is visible: no masking in this path
      const float *kr = x.k + int64_t(idx[r]) * x.kW;
      __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
      int64_t ch = 0;
      for (; ch + 1 < nd; ch += 2) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(kr + ch * kLanes), _mm512_load_ps(qs + ch * kLanes), a0);
        a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(maskOf(ch + 1), kr + (ch + 1) * kLanes),
                             _mm512_load_ps(qs + (ch + 1) * kLanes), a1);
      }
      if (ch < nd)
        a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(maskOf(ch), kr + ch * kLanes), _mm512_load_ps(qs + ch * kLanes), a0);
      s[r] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    }
    __m512 vmax = _mm512_set1_ps(m);
    for (int r = 0; r < nk; r += kLanes) {
      const __mmask16 k = nk - r >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << (nk - r)) - 1u);
      vmax = _mm512_mask_max_ps(vmax, k, vmax, _mm512_maskz_loadu_ps(k, s + r));
    }
    const float alpha = onlineSoftmaxStep(s, nk, vmax, m, l);
    const __m512 va = _mm512_set1_ps(alpha);
    for (int64_t ch = 0; ch < nd; ++ch) {
      const __mmask16 k = maskOf(ch);
      __m512 a0 = _mm512_mul_ps(_mm512_load_ps(acc + ch * kLanes), va);
      __m512 a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
      int r = 0;
      for (; r + 4 <= nk; r += 4) {  // four chains hide the FMA latency
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(s[r]), _mm512_maskz_loadu_ps(k, x.v + int64_t(idx[r]) * x.vW + ch * kLanes), a0);
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(s[r + 1]), _mm512_maskz_loadu_ps(k, x.v + int64_t(idx[r + 1]) * x.vW + ch * kLanes), a1);
        a2 = _mm512_fmadd_ps(_mm512_set1_ps(s[r + 2]), _mm512_maskz_loadu_ps(k, x.v + int64_t(idx[r + 2]) * x.vW + ch * kLanes), a2);
        a3 = _mm512_fmadd_ps(_mm512_set1_ps(s[r + 3]), _mm512_maskz_loadu_ps(k, x.v + int64_t(idx[r + 3]) * x.vW + ch * kLanes), a3);
      }
      for (; r < nk; ++r)
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(s[r]), _mm512_maskz_loadu_ps(k, x.v + int64_t(idx[r]) * x.vW + ch * kLanes), a0);
      _mm512_store_ps(acc + ch * kLanes, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    }
  }
  const float inv = mOut ? 1.0f : (l > 0.0f ? 1.0f / l : 0.0f);
  const __m512 vinv = _mm512_set1_ps(inv);
  for (int64_t ch = 0; ch < nd; ++ch)
    _mm512_mask_storeu_ps(o + ch * kLanes, maskOf(ch), _mm512_mul_ps(_mm512_load_ps(acc + ch * kLanes), vinv));
  if (mOut) *mOut = m, *lOut = l;
}

}  // namespace

void taskAvx512(const Params &p, int64_t b, int64_t h, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                float *scratch, const TaskOut &out) {
  using RowFn = void (*)(const Params &, int64_t, int64_t, int64_t, int64_t, int64_t, float *, float *, float *,
                         float *);
  static constexpr RowFn kFixed[9] = {nullptr,         rowTaskFixed<1>, rowTaskFixed<2>, rowTaskFixed<3>,
                                      rowTaskFixed<4>, rowTaskFixed<5>, rowTaskFixed<6>, rowTaskFixed<7>,
                                      rowTaskFixed<8>};
  const RowFn rowFn = p.headDim % kLanes == 0 && p.headDim <= 8 * kLanes ? kFixed[p.headDim / kLanes] : rowTask;
  auto rowPath = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      rowFn(p, b, h, i0 + r, j0, j1, scratch, out.o + r * out.oStride, out.m ? out.m + r : nullptr,
            out.m ? out.l + r : nullptr);
  };
  const int64_t rows = i1 - i0;
  if (rows < kMinWideRows) return rowPath(0, rows);

  const View x(p, b, h);
  const ScratchLayout lay = scratchLayout(p.headDim, p.sk);
  // Packing costs one read + write of the K/V rows: worth it once several tiles reuse them.
  const KeyList keys = buildKeyList(x, p.sk, j0, j1, scratch, lay, lay.packs && rows > kQueryTile);
  for (int64_t t = 0; t < rows; t += kQueryTile) {
    const int64_t n = minI(kQueryTile, rows - t);
    const TaskOut sub{out.o + t * out.oStride, out.oStride, out.m ? out.m + t : nullptr, out.m ? out.l + t : nullptr};
    if (n < kMinWideRows) {
      rowPath(t, t + n);
    } else if (n <= kLanes) {
      wideTask<1>(p, x, i0 + t, n, keys, scratch, sub);
    } else {
      wideTask<2>(p, x, i0 + t, n, keys, scratch, sub);
    }
  }
}

}  // namespace attention
}  // namespace tfmrt
