// AVX2 + FMA body of the weight gradient dW = dy^T x (weight_grad.h). Compiled with -mavx2 -mfma
// and entered only after attention::cpuHasAvx2Fma(); no C++ library header, no inline function of
// a shared header (see packed_gemm_avx512.cpp).
#include <immintrin.h>

#include <cstdint>

#include "kernels/avx2_exp.h"
#include "kernels/gemm/weight_grad.h"

namespace tfmrt::gemm {
namespace {

constexpr int kRows = 6;  // of dW per block: 12 accumulators, 2 x vectors, 1 broadcast

// dW rows [n0, n0 + MR), columns [k0, k0 + 16) (fewer when kTail: K - k0 < 16), over rows
// [r0, r1) of x; `a` holds those rows' dy[r][n0 .. n0 + MR) packed kRows apart; `first`: the
// chain starts here (else it continues from dW).
template <int MR, bool kTail>
void block(const float *a, const float *x, int64_t K, int64_t r0, int64_t r1, int64_t n0, int64_t k0, bool first,
           float *dw) {
  __m256i m0 = _mm256_set1_epi32(-1), m1 = m0;
  if (kTail) {
    const int64_t rem = K - k0;
    m0 = avx2::tailMask(rem < 8 ? rem : 8);
    m1 = avx2::tailMask(rem > 8 ? rem - 8 : 0);
  }
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    float *d = dw + (n0 + i) * K + k0;
    if (first) {
      acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    } else if (kTail) {
      acc[i][0] = _mm256_maskload_ps(d, m0);
      acc[i][1] = _mm256_maskload_ps(d + 8, m1);
    } else {
      acc[i][0] = _mm256_loadu_ps(d);
      acc[i][1] = _mm256_loadu_ps(d + 8);
    }
  }
  for (int64_t r = r0; r < r1; ++r) {
    const float *xr = x + r * K + k0;
    const __m256 b0 = kTail ? _mm256_maskload_ps(xr, m0) : _mm256_loadu_ps(xr);
    const __m256 b1 = kTail ? _mm256_maskload_ps(xr + 8, m1) : _mm256_loadu_ps(xr + 8);
    const float *ar = a + (r - r0) * kRows;
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m256 ai = _mm256_broadcast_ss(ar + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    float *d = dw + (n0 + i) * K + k0;
    if (kTail) {
      _mm256_maskstore_ps(d, m0, acc[i][0]);
      _mm256_maskstore_ps(d + 8, m1, acc[i][1]);
    } else {
      _mm256_storeu_ps(d, acc[i][0]);
      _mm256_storeu_ps(d + 8, acc[i][1]);
    }
  }
}

template <bool kTail>
void blockRows(int rows, const float *a, const float *x, int64_t K, int64_t r0, int64_t r1, int64_t n0, int64_t k0,
               bool first, float *dw) {
  switch (rows) {
    case 6: return block<6, kTail>(a, x, K, r0, r1, n0, k0, first, dw);
    case 5: return block<5, kTail>(a, x, K, r0, r1, n0, k0, first, dw);
    case 4: return block<4, kTail>(a, x, K, r0, r1, n0, k0, first, dw);
    case 3: return block<3, kTail>(a, x, K, r0, r1, n0, k0, first, dw);
    case 2: return block<2, kTail>(a, x, K, r0, r1, n0, k0, first, dw);
    default: return block<1, kTail>(a, x, K, r0, r1, n0, k0, first, dw);
  }
}

}  // namespace

void weightGradRowsAvx2(const float *dy, const float *x, int64_t R, int64_t N, int64_t K, int64_t n0, int64_t n1,
                        float *dw) {
  // Rows of x per chunk: its [chunk, K] slice (~192 KB) stays in L2 while every block of this
  // thread's dW rows passes over it. Each block's dy values (6 of each row) are first packed
  // together: read in place, rows N floats apart (32 KB for the vocabulary's 8000) fall into a few
  // L1 sets and were fetched again for every 16 columns (62 vs oneDNN's 95 GFLOP/s there).
  constexpr int64_t kMaxChunk = 256;
  int64_t chunk = (int64_t(48) << 10) / (K > 0 ? K : 1);
  chunk = chunk < 16 ? 16 : chunk > kMaxChunk ? kMaxChunk : chunk;
  alignas(32) float a[kMaxChunk * kRows];
  for (int64_t r0 = 0; r0 < R; r0 += chunk) {
    const int64_t r1 = r0 + chunk < R ? r0 + chunk : R;
    for (int64_t n = n0; n < n1; n += kRows) {
      const int rows = int(n1 - n < kRows ? n1 - n : kRows);
      for (int64_t r = r0; r < r1; ++r)
        for (int i = 0; i < rows; ++i) a[(r - r0) * kRows + i] = dy[r * N + n + i];
      int64_t k0 = 0;
      for (; k0 + 16 <= K; k0 += 16) blockRows<false>(rows, a, x, K, r0, r1, n, k0, r0 == 0, dw);
      if (k0 < K) blockRows<true>(rows, a, x, K, r0, r1, n, k0, r0 == 0, dw);
    }
  }
}

}  // namespace tfmrt::gemm
