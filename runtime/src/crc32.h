// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), as used by zip/png: the artifact checksum.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tfmrt {

uint32_t crc32(const uint8_t *data, size_t size, uint32_t crc = 0);

}  // namespace tfmrt
