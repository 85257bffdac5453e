// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, as iSCSI, ext4 and RocksDB use), for
// checksums of files this program writes and reads back (the disk KV tier). SSE4.2's crc32
// instruction where the CPU has it (every x86-64 this project runs on: AVX2 implies it), ARMv8's
// crc32c instructions where the CPU has them (HWCAP_CRC32), else a table; all give the same value. Extend(crc, ...) continues a running checksum, so data in
// several pieces checksums as if contiguous: Crc32c(a+b) == Extend(Crc32c(a), b).
#pragma once

#include <cstddef>
#include <cstdint>

namespace radixlm::core {

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }
// The table version alone (the tests' oracle for the hardware one).
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n);

}  // namespace radixlm::core
