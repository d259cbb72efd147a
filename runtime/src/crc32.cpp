#include "crc32.h"

#include <array>
#include <cstring>

namespace tfmrt {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the 8-byte step reads little-endian words");

// Slicing-by-8: table[k][b] is the CRC of byte b followed by k zero bytes, so eight input bytes
// are folded per step with eight independent lookups (byte at a time: ~350 MB/s here, most of
// a checkpoint load's time).
using Tables = std::array<std::array<uint32_t, 256>, 8>;

Tables makeTables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i)
    for (int k = 1; k < 8; ++k) t[size_t(k)][i] = (t[size_t(k) - 1][i] >> 8) ^ t[0][t[size_t(k) - 1][i] & 0xFFu];
  return t;
}

// The register's update over `size` bytes (no inversions).
uint32_t tableBytes(const uint8_t *data, size_t size, uint32_t crc) {
  static const Tables t = makeTables();
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint32_t lo, hi;  // little-endian words (x86)
    std::memcpy(&lo, data + i, 4);
    std::memcpy(&hi, data + i + 4, 4);
    lo ^= crc;
    crc = t[7][lo & 0xFFu] ^ t[6][(lo >> 8) & 0xFFu] ^ t[5][(lo >> 16) & 0xFFu] ^ t[4][lo >> 24] ^
          t[3][hi & 0xFFu] ^ t[2][(hi >> 8) & 0xFFu] ^ t[1][(hi >> 16) & 0xFFu] ^ t[0][hi >> 24];
  }
  for (; i < size; ++i) crc = t[0][(crc ^ data[i]) & 0xFFu] ^ (crc >> 8);
  return crc;
}

}  // namespace

bool cpuHasVpclmul() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul");
}

uint32_t crc32Table(const uint8_t *data, size_t size, uint32_t crc) { return ~tableBytes(data, size, ~crc); }

uint32_t crc32(const uint8_t *data, size_t size, uint32_t crc) {
  static const bool folding = cpuHasVpclmul();
  crc = ~crc;
  if (folding && size >= 256) {
    uint8_t last[16];
    size_t consumed = 0;
    crc_detail::foldVpclmul(data, size, crc, last, &consumed);
    crc = tableBytes(last, 16, 0);
    data += consumed;
    size -= consumed;
  }
  return ~tableBytes(data, size, crc);
}

}  // namespace tfmrt
