// CRC-32 by carry-less multiplication (VPCLMULQDQ on 512-bit vectors): crc32.cpp enters it only
// after cpuHasVpclmul(), and only this TU is compiled with the ISA flags. Like the other ISA TUs it
// includes no C++ library header (an AVX-512 copy of an inline function could be picked by the
// linker for the whole library).
//
// Folding: a 16-byte little-endian chunk holds a polynomial A(x) whose bit t is the coefficient of
// x^(127 - t) (this CRC's reflected order); its low 64 bits are the high half L, its high 64 bits
// the low half H: A = L x^64 + H. Moving it D bits later in the message multiplies it by x^D, and
// modulo P(x), L x^(D+64) + H x^D = L (x^(D+64) mod P) + H (x^D mod P): two carry-less products of
// degree < 128, so the folded chunk is again 16 bytes, XORed onto the chunk D bits later. A product
// of two reflected 64-bit values lands one bit short of the 128-bit frame, hence the constants
// x^(E-1) mod P (reflected, in the upper 32 bits). The last folded chunk has the residue of all
// bytes before it, so the table loop finishes it (register 0) together with the tail.
//
// GCC 12 warns about the undefined pass-through operand inside its own _mm512_extracti32x4_epi32
// (a false positive in avx512fintrin.h, as for _mm512_undefined_ps in packed_gemm_avx512.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "crc32.h"

namespace tfmrt::crc_detail {
namespace {

// x^e mod P(x), P = x^32 + 0x04C11DB7 (CRC-32's polynomial, normal order).
constexpr uint32_t xPowMod(int e) {
  uint32_t r = 1;  // x^0
  for (int i = 0; i < e; ++i) r = (r & 0x80000000u) ? (r << 1) ^ 0x04C11DB7u : r << 1;
  return r;
}
constexpr uint32_t reflect32(uint32_t v) {
  uint32_t r = 0;
  for (int i = 0; i < 32; ++i)
    if (v >> i & 1u) r |= 1u << (31 - i);
  return r;
}
// The constant that moves a lane D bits on: (for the low qword, for the high qword).
constexpr uint64_t foldConstant(int e) { return uint64_t(reflect32(xPowMod(e - 1))) << 32; }


inline __m512i fold(__m512i x, __m512i k) {
  return _mm512_xor_si512(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11));
}
inline __m128i fold(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}
inline __m512i lanes(uint64_t lo, uint64_t hi) { return _mm512_set4_epi64(int64_t(hi), int64_t(lo), int64_t(hi), int64_t(lo)); }

}  // namespace

// size >= 256, reg = the CRC register before `data` (inverted, as the table loop keeps it). Folds
// all whole 16-byte chunks into one, written to `last`, which then has the residue of
// data[0, *consumed) with that register; *consumed = size rounded down to a multiple of 16.
void foldVpclmul(const uint8_t *data, size_t size, uint32_t reg, uint8_t last[16], size_t *consumed) {
  constexpr uint64_t k2048Lo = foldConstant(2048 + 64), k2048Hi = foldConstant(2048);
  constexpr uint64_t k512Lo = foldConstant(512 + 64), k512Hi = foldConstant(512);
  constexpr uint64_t k128Lo = foldConstant(128 + 64), k128Hi = foldConstant(128);
  const __m512i k2048 = lanes(k2048Lo, k2048Hi), k512 = lanes(k512Lo, k512Hi);
  const __m128i k128 = _mm_set_epi64x(int64_t(k128Hi), int64_t(k128Lo));
  // Four vectors (256 bytes) in flight; the register enters as the message's first 32 bits.
  __m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(data), _mm512_zextsi128_si512(_mm_cvtsi32_si128(int(reg))));
  __m512i x1 = _mm512_loadu_si512(data + 64), x2 = _mm512_loadu_si512(data + 128), x3 = _mm512_loadu_si512(data + 192);
  size_t i = 256;
  for (; i + 256 <= size; i += 256) {
    x0 = _mm512_xor_si512(fold(x0, k2048), _mm512_loadu_si512(data + i));
    x1 = _mm512_xor_si512(fold(x1, k2048), _mm512_loadu_si512(data + i + 64));
    x2 = _mm512_xor_si512(fold(x2, k2048), _mm512_loadu_si512(data + i + 128));
    x3 = _mm512_xor_si512(fold(x3, k2048), _mm512_loadu_si512(data + i + 192));
  }
  // Four vectors -> one (each 64 bytes before the next), then whole vectors left.
  x1 = _mm512_xor_si512(fold(x0, k512), x1);
  x2 = _mm512_xor_si512(fold(x1, k512), x2);
  __m512i x = _mm512_xor_si512(fold(x2, k512), x3);
  for (; i + 64 <= size; i += 64) x = _mm512_xor_si512(fold(x, k512), _mm512_loadu_si512(data + i));
  // Four lanes -> one (16 bytes apart), then 16-byte chunks left.
  __m128i y = _mm512_castsi512_si128(x);
  y = _mm_xor_si128(fold(y, k128), _mm512_extracti32x4_epi32(x, 1));
  y = _mm_xor_si128(fold(y, k128), _mm512_extracti32x4_epi32(x, 2));
  y = _mm_xor_si128(fold(y, k128), _mm512_extracti32x4_epi32(x, 3));
  for (; i + 16 <= size; i += 16) y = _mm_xor_si128(fold(y, k128), _mm_loadu_si128(reinterpret_cast<const __m128i *>(data + i)));
  _mm_storeu_si128(reinterpret_cast<__m128i *>(last), y);
  *consumed = i;
}

}  // namespace tfmrt::crc_detail
