// tfm.fused_attention, AVX-512 flash kernel: one task = up to 32 query rows of one (batch, head)
// against a key range, with an online softmax over chunks of kKeyChunk visible keys.
//
// This TU is compiled with -mavx512f -mavx512vl -mavx512dq -mfma and is only entered after
// cpuHasAvx512() (attention_driver.cpp). It deliberately includes no C++ library headers and calls
// no inline function of a shared header: an inline/template function instantiated here would be
// AVX-512 code that the linker may pick for the whole library (an SIGILL on older CPUs).
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
// Keys are gathered per chunk as a list of *visible* key indices: padding keys (key_keep = 0) and
// keys past the causal limit of the tile's last row cost nothing; only keys past the causal limit
// of the tile's *first* row need a per-lane -inf mask. A chunk is therefore never fully masked.
//
// Row path (< kMinWideRows rows, e.g. Sq = 1 decoding): one query row at a time, vectorised over
// head_dim: dot products + a horizontal add per key, exp2 over the chunk's scores, then
// acc += p_j * V[j]. Memory-bound on K/V there anyway.
// GCC 12 warns about _mm512_undefined_ps() inside its own masked intrinsics (a known false
// positive of -Wmaybe-uninitialized in avx512fintrin.h).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/attention/attention.h"

namespace tfmrt {
namespace attention {
namespace {

constexpr float kLog2e = 1.44269504088896340736f;
constexpr int64_t kLanes = 16;

inline int64_t minI(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t maxI(int64_t a, int64_t b) { return a > b ? a : b; }

// 2^x for x <= 0 (score - running max); x < -126 (incl. -inf from masking, and NaN) gives exactly
// 0. Cephes exp2f: x = n + f, |f| <= 1/2, 2^f = 1 + f P(f), relative error ~2e-7.
inline __m512 exp2v(__m512 x) {
  const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-126.0f), _CMP_GE_OQ);
  x = _mm512_max_ps(x, _mm512_set1_ps(-127.0f));  // keeps dead lanes finite (no inf - inf)
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(1.535336188319500e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339887440266574e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(live, p, n);
}

// Pointers into q/k/v (not Params' inline helpers: see the header comment).
struct View {
  const float *q, *k, *v;
  const uint8_t *keep;
  int64_t qW, kW, vW, D;

  View(const Params &p, int64_t b, int64_t h)
      : q(p.q + b * p.sq * p.qWidth + p.qOffset + h * p.headDim),
        k(p.k + b * p.sk * p.kWidth + p.kOffset + h * p.headDim),
        v(p.v + b * p.sk * p.vWidth + p.vOffset + h * p.headDim), keep(p.keep + b * p.sk), qW(p.qWidth),
        kW(p.kWidth), vW(p.vWidth), D(p.headDim) {}
};

// Gathers up to kKeyChunk visible keys from [j, jEnd) into idx; advances j. Returns the count.
inline int gatherKeys(const uint8_t *keep, int64_t &j, int64_t jEnd, int32_t *idx) {
  int n = 0;
  for (; j < jEnd && n < kKeyChunk; ++j)
    if (keep[j]) idx[n++] = int32_t(j);
  return n;
}

// Lanes of query vector `vec` that must not see key j: lane l is query i0 + 16 vec + l, which sees
// j iff j <= i0 + 16 vec + l + shift, i.e. the first (j - i0 - shift - 16 vec) lanes are masked.
inline __mmask16 causalMask(int64_t j, int64_t firstRowLimit, int vec) {
  const int64_t hidden = j - firstRowLimit - int64_t(vec) * kLanes;  // firstRowLimit = i0 + shift
  if (hidden <= 0) return 0;
  if (hidden >= kLanes) return 0xFFFF;
  return __mmask16((1u << hidden) - 1u);
}

// ---- wide path ------------------------------------------------------------------------------

// St[r][.] = K[idx[r]] . Qt for R keys (R x NV accumulators; 16 for R = 8, NV = 2).
template <int NV, int R>
inline void scoreBlock(const float *Qt, const float *const *krow, int64_t D, float *St, const int32_t *idx,
                       bool needMask, int64_t firstRowLimit) {
  constexpr int64_t W = NV * kLanes;
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t d = 0; d < D; ++d) {
    __m512 qv[NV];
    for (int v = 0; v < NV; ++v) qv[v] = _mm512_load_ps(Qt + d * W + v * kLanes);
    for (int r = 0; r < R; ++r) {
      const __m512 kb = _mm512_set1_ps(krow[r][d]);
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(kb, qv[v], acc[r][v]);
    }
  }
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) {
      __m512 s = acc[r][v];
      if (needMask) s = _mm512_mask_mov_ps(s, causalMask(idx[r], firstRowLimit, v), ninf);
      _mm512_store_ps(St + r * W + v * kLanes, s);
    }
}

// Ot[d0 .. d0+RD)[.] = alpha * Ot + sum_r V[idx[r]][d] * P[r][.]
template <int NV, int RD>
inline void pvBlock(float *Ot, const float *St, const float *const *vrow, int nk, int64_t d0, const __m512 *alpha) {
  constexpr int64_t W = NV * kLanes;
  __m512 acc[RD][NV];
  for (int rd = 0; rd < RD; ++rd)
    for (int v = 0; v < NV; ++v) acc[rd][v] = _mm512_mul_ps(_mm512_load_ps(Ot + (d0 + rd) * W + v * kLanes), alpha[v]);
  for (int r = 0; r < nk; ++r) {
    __m512 pv[NV];
    for (int v = 0; v < NV; ++v) pv[v] = _mm512_load_ps(St + r * W + v * kLanes);
    const float *vr = vrow[r] + d0;
    for (int rd = 0; rd < RD; ++rd) {
      const __m512 vb = _mm512_set1_ps(vr[rd]);
      for (int v = 0; v < NV; ++v) acc[rd][v] = _mm512_fmadd_ps(vb, pv[v], acc[rd][v]);
    }
  }
  for (int rd = 0; rd < RD; ++rd)
    for (int v = 0; v < NV; ++v) _mm512_store_ps(Ot + (d0 + rd) * W + v * kLanes, acc[rd][v]);
}

template <int NV, int N>
inline void scoreTail(int n, const float *Qt, const float *const *krow, int64_t D, float *St, const int32_t *idx,
                      bool needMask, int64_t lim) {
  if constexpr (N > 0) {
    if (n == N) return scoreBlock<NV, N>(Qt, krow, D, St, idx, needMask, lim);
    scoreTail<NV, N - 1>(n, Qt, krow, D, St, idx, needMask, lim);
  }
}

template <int NV, int N>
inline void pvTail(int n, float *Ot, const float *St, const float *const *vrow, int nk, int64_t d0,
                   const __m512 *alpha) {
  if constexpr (N > 0) {
    if (n == N) return pvBlock<NV, N>(Ot, St, vrow, nk, d0, alpha);
    pvTail<NV, N - 1>(n, Ot, St, vrow, nk, d0, alpha);
  }
}

template <int NV>
void wideTask(const Params &p, int64_t b, int64_t h, int64_t i0, int64_t rows, int64_t j0, int64_t j1,
              float *scratch, const TaskOut &out) {
  constexpr int64_t W = NV * kLanes;
  constexpr int kR = 8;               // keys per score block: 8 x NV accumulators
  constexpr int kRD = 16 / NV;        // head_dim rows per output block: 16 accumulators
  const View x(p, b, h);
  const int64_t D = x.D;
  float *Qt = scratch;                       // [D][W]
  float *Ot = Qt + D * W;                    // [D][W]
  float *St = Ot + D * W;                    // [kKeyChunk][W]: scores, then probabilities
  const float **krow = reinterpret_cast<const float **>(St + kKeyChunk * W);  // [kKeyChunk]
  const float **vrow = krow + kKeyChunk;                                       // [kKeyChunk]
  int32_t *idx = reinterpret_cast<int32_t *>(vrow + kKeyChunk);                // [kKeyChunk]

  const float c = p.scale * kLog2e;
  for (int64_t r = 0; r < W; ++r) {
    if (r < rows) {
      const float *qr = x.q + (i0 + r) * x.qW;
      for (int64_t d = 0; d < D; ++d) Qt[d * W + r] = qr[d] * c;
    } else {
      for (int64_t d = 0; d < D; ++d) Qt[d * W + r] = 0.0f;  // padding lanes: finite, discarded
    }
  }
  for (int64_t e = 0; e < D * W; e += kLanes) _mm512_store_ps(Ot + e, _mm512_setzero_ps());

  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  __m512 m[NV], l[NV];
  for (int v = 0; v < NV; ++v) m[v] = ninf, l[v] = _mm512_setzero_ps();

  // Keys [j0, jEnd) can be visible to some row; keys >= jAll only to some lanes.
  const int64_t shift = p.sk - p.sq;  // = p.causalShift(), spelled out (no shared inline code)
  const int64_t jEnd = p.causal ? minI(j1, i0 + rows + shift) : j1;
  const int64_t firstRowLimit = i0 + shift;
  const int64_t jAll = p.causal ? firstRowLimit + 1 : j1;

  int64_t j = maxI(j0, 0);
  while (j < jEnd) {
    const int nk = gatherKeys(x.keep, j, jEnd, idx);
    if (nk == 0) break;
    for (int r = 0; r < nk; ++r) {
      krow[r] = x.k + int64_t(idx[r]) * x.kW;
      vrow[r] = x.v + int64_t(idx[r]) * x.vW;
    }
    // Scores.
    int r = 0;
    for (; r + kR <= nk; r += kR)
      scoreBlock<NV, kR>(Qt, krow + r, D, St + r * W, idx + r, idx[r + kR - 1] >= jAll, firstRowLimit);
    if (r < nk) scoreTail<NV, kR - 1>(nk - r, Qt, krow + r, D, St + r * W, idx + r, idx[nk - 1] >= jAll, firstRowLimit);

    // Online softmax: new running max, rescale factor for the old state, probabilities in place.
    __m512 mx[NV], base[NV], alpha[NV], sum[NV];
    for (int v = 0; v < NV; ++v) mx[v] = m[v];
    for (int rr = 0; rr < nk; ++rr)
      for (int v = 0; v < NV; ++v) mx[v] = _mm512_max_ps(mx[v], _mm512_load_ps(St + rr * W + v * kLanes));
    for (int v = 0; v < NV; ++v) {
      // A lane with nothing visible yet keeps max -inf: subtract 0 instead so exp2(-inf) = 0.
      const __mmask16 none = _mm512_cmp_ps_mask(mx[v], ninf, _CMP_EQ_OQ);
      base[v] = _mm512_mask_mov_ps(mx[v], none, _mm512_setzero_ps());
      alpha[v] = exp2v(_mm512_sub_ps(m[v], base[v]));
      m[v] = mx[v];
      sum[v] = _mm512_setzero_ps();
    }
    for (int rr = 0; rr < nk; ++rr)
      for (int v = 0; v < NV; ++v) {
        const __m512 pr = exp2v(_mm512_sub_ps(_mm512_load_ps(St + rr * W + v * kLanes), base[v]));
        _mm512_store_ps(St + rr * W + v * kLanes, pr);
        sum[v] = _mm512_add_ps(sum[v], pr);
      }
    for (int v = 0; v < NV; ++v) l[v] = _mm512_fmadd_ps(l[v], alpha[v], sum[v]);

    // Output accumulators.
    int64_t d = 0;
    for (; d + kRD <= D; d += kRD) pvBlock<NV, kRD>(Ot, St, vrow, nk, d, alpha);
    if (d < D) pvTail<NV, kRD - 1>(int(D - d), Ot, St, vrow, nk, d, alpha);
  }

  // Write back transposed: normalised, or the partial state of a key split.
  alignas(64) float scaleOut[W], mOut[W], lOut[W];
  for (int v = 0; v < NV; ++v) {
    _mm512_store_ps(mOut + v * kLanes, m[v]);
    _mm512_store_ps(lOut + v * kLanes, l[v]);
    const __mmask16 pos = _mm512_cmp_ps_mask(l[v], _mm512_setzero_ps(), _CMP_GT_OQ);
    _mm512_store_ps(scaleOut + v * kLanes,
                    out.m ? _mm512_set1_ps(1.0f) : _mm512_maskz_div_ps(pos, _mm512_set1_ps(1.0f), l[v]));
  }
  for (int64_t r = 0; r < rows; ++r) {
    float *o = out.o + r * out.oStride;
    const float s = scaleOut[r];
    for (int64_t dd = 0; dd < D; ++dd) o[dd] = Ot[dd * W + r] * s;
    if (out.m) out.m[r] = mOut[r], out.l[r] = lOut[r];
  }
}

// ---- row path -------------------------------------------------------------------------------

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
    const float mNew = _mm512_reduce_max_ps(vmax);  // finite: nk >= 1 visible keys
    const float alpha = _mm_cvtss_f32(_mm512_castps512_ps128(exp2v(_mm512_set1_ps(m - mNew))));
    m = mNew;
    __m512 vsum = _mm512_setzero_ps();
    const __m512 vm = _mm512_set1_ps(mNew);
    for (int r = 0; r < nk; r += kLanes) {
      const __mmask16 k = nk - r >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << (nk - r)) - 1u);
      const __m512 pr = _mm512_maskz_mov_ps(k, exp2v(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + r), vm)));
      _mm512_mask_storeu_ps(s + r, k, pr);
      vsum = _mm512_add_ps(vsum, pr);
    }
    l = l * alpha + _mm512_reduce_add_ps(vsum);
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

void taskAvx512(const Params &p, int64_t b, int64_t h, int64_t i0, int64_t rows, int64_t j0, int64_t j1,
                float *scratch, const TaskOut &out) {
  if (rows < kMinWideRows) {
    for (int64_t r = 0; r < rows; ++r)
      rowTask(p, b, h, i0 + r, j0, j1, scratch, out.o + r * out.oStride, out.m ? out.m + r : nullptr,
              out.m ? out.l + r : nullptr);
  } else if (rows <= kLanes) {
    wideTask<1>(p, b, h, i0, rows, j0, j1, scratch, out);
  } else {
    wideTask<2>(p, b, h, i0, rows, j0, j1, scratch, out);
  }
}

}  // namespace attention
}  // namespace tfmrt
