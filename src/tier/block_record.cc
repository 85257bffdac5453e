#include "tier/block_record.h"

#include <cstring>

#include "core/crc32c.h"

namespace radixlm::tier {
namespace {
constexpr char kMagic[8] = {'R', 'L', 'M', 'K', 'V', 'B', 'L', 'K'};
constexpr uint32_t kVersion = 1;
}  // namespace

void SealRecord(const cache::BlockDigest& fingerprint, int32_t block_tokens, const RecordId& id, std::span<uint8_t> record) {
  RecordHeader h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kVersion;
  h.header_bytes = kRecordHeaderBytes;
  h.payload_bytes = record.size() - kRecordHeaderBytes;
  h.block_tokens = static_cast<uint32_t>(block_tokens);
  std::memcpy(h.fingerprint, fingerprint.data(), 32);
  std::memcpy(h.key, id.key.data(), 32);
  h.kind = id.state ? 1 : 0;
  h.tail = id.state ? static_cast<uint32_t>(id.tail) : 0;
  if (id.state) std::memcpy(h.parent, id.parent.data(), 32);
  h.crc = 0;
  h.crc = core::Crc32cExtend(core::Crc32c(&h, sizeof h), record.data() + kRecordHeaderBytes, h.payload_bytes);
  std::memcpy(record.data(), &h, sizeof h);
}

bool HeaderMatches(const RecordHeader& h, const cache::BlockDigest& fingerprint, int32_t block_tokens, bool state,
                   const cache::TierKey& key, uint64_t payload_bytes) {
  return std::memcmp(h.magic, kMagic, 8) == 0 && h.version == kVersion && h.header_bytes == kRecordHeaderBytes &&
         h.kind == (state ? 1u : 0u) && h.payload_bytes == payload_bytes &&
         h.block_tokens == static_cast<uint32_t>(block_tokens) && std::memcmp(h.fingerprint, fingerprint.data(), 32) == 0 &&
         std::memcmp(h.key, key.data(), 32) == 0;
}

bool CrcMatches(const RecordHeader& h, std::span<const iovec> payload) {
  RecordHeader zero = h;
  zero.crc = 0;
  uint32_t crc = core::Crc32c(&zero, sizeof zero);
  for (const iovec& v : payload) crc = core::Crc32cExtend(crc, v.iov_base, v.iov_len);
  return crc == h.crc;
}

}  // namespace radixlm::tier
