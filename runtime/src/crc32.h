// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), as used by zip/png: the artifact checksum.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tfmrt {

// Folds with carry-less multiplication where the CPU has VPCLMULQDQ and AVX-512 (~10x the table
// loop's speed: the checksum was ~18 % of a one-line `tfmc translate`), else crc32Table.
uint32_t crc32(const uint8_t *data, size_t size, uint32_t crc = 0);
// Slicing-by-8 table loop: the portable path and the reference the folding one is tested against.
uint32_t crc32Table(const uint8_t *data, size_t size, uint32_t crc = 0);
bool cpuHasVpclmul();  // VPCLMULQDQ, PCLMULQDQ and AVX-512F, checked at run time

namespace crc_detail {
void foldVpclmul(const uint8_t *data, size_t size, uint32_t reg, uint8_t last[16], size_t *consumed);
}

}  // namespace tfmrt
