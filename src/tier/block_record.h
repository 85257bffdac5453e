// The record every medium stores a KV block (or a hybrid model's recurrent state) as: a 192-byte
// header, then the payload (the pool's bytes). The disk tier writes one per file, the remote
// tier one per value; a reader checks all of it before a byte reaches the pool.
//
// Header: magic, format version, header and payload sizes, block tokens, the model fingerprint's
// digest, the key, the kind (0 block, 1 state), a state's parent and tail, and CRC-32C of the
// header (with crc = 0) followed by the payload. Little-endian, as every CPU radixlm builds for.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "cache/block_tier.h"

namespace radixlm::tier {

inline constexpr size_t kRecordHeaderBytes = 192;

struct RecordHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t payload_bytes;
  uint32_t block_tokens;
  uint32_t crc;              // CRC-32C of this header with crc = 0, then the payload
  uint8_t fingerprint[32];
  uint8_t key[32];
  uint32_t kind;             // 0: a KV block; 1: a recurrent state (+ the KV of its partial block)
  uint32_t tail;             // a state: tokens after its parent block
  uint8_t parent[32];        // a state: its parent block's key
  uint8_t reserved[kRecordHeaderBytes - 8 - 4 - 4 - 8 - 4 - 4 - 32 - 32 - 4 - 4 - 32];
};
static_assert(sizeof(RecordHeader) == kRecordHeaderBytes);

// What a record says it is, beyond its bytes.
struct RecordId {
  cache::TierKey key{};
  bool state = false;
  cache::TierKey parent{};   // a state's parent block
  int32_t tail = 0;          // a state's tokens after it
};

// Writes the header (and its CRC) at the front of `record`, whose payload follows it.
// REQUIRES: record.size() >= kRecordHeaderBytes.
void SealRecord(const cache::BlockDigest& fingerprint, int32_t block_tokens, const RecordId& id, std::span<uint8_t> record);
// Whether `h` is a header of this format for exactly this record: fingerprint, block size, kind,
// key and payload size (the CRC is checked by CrcMatches, once the payload is read).
bool HeaderMatches(const RecordHeader& h, const cache::BlockDigest& fingerprint, int32_t block_tokens, bool state,
                   const cache::TierKey& key, uint64_t payload_bytes);
// Whether the CRC in `h` is that of h and the payload read into `payload`.
bool CrcMatches(const RecordHeader& h, std::span<const iovec> payload);

}  // namespace radixlm::tier
