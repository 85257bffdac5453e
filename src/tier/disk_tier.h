// The disk tier under the KV block pool (cache::BlockTier): one file per block, named by its
// content key, in a folder any number of radixlm processes of one host may share, that
// outlives them (a restart, a deploy, a crash starts warm).
//
// On disk (the folder is 0700, files 0600: headers name other tenants' blocks):
//   <dir>/v1/<fp>/MANIFEST          the fingerprint's canonical text (for people; fp is its SHA-256)
//   <dir>/v1/<fp>/kv/<ab>/<key>.kv  a block: header, then the payload (the pool's bytes)
//   <dir>/v1/<fp>/ssm/<ab>/<key>.st a hybrid model's recurrent state, with the KV block of the
//                                   tokens after its last full block (the header names that
//                                   block's key, its parent, and how many tokens follow it)
//   <dir>/v1/<fp>/tmp/<pid>.<n>     writes in progress
// <fp> is the model fingerprint's digest (weights, numerics, KV layout: runner/tier_setup.h)
// and seeds every key (cache/block_tier.h), so another model, another quant or another KV dtype
// never reads this one's blocks: it has its own folder, and its keys differ anyway.
//
// A file: one record (tier/block_record.h: a 192-byte header with the fingerprint digest, the key,
// the kind and CRC-32C, then the payload). A load checks all of it; a file that fails any check is deleted and the load fails
// (the engine recomputes the block), never used.
//
// Writes are behind the caller: Store() copies the bytes into a queue (bounded; beyond it a
// store is skipped and counted) and one writer thread writes each to tmp/, then publishes it by
// an atomic rename (renameat2 RENAME_NOREPLACE: the first writer of a key wins; the bytes of a
// key are the same whoever writes them). A reader therefore never sees a half-written block: a
// kill -9 leaves only tmp/ files, removed at the next start when their process is gone. The
// rename is the commit and the folder is the index: Open() rebuilds the key set by listing kv/
// (no journal to replay). Other processes' new blocks are found by Contains(): a miss in the
// in-memory index looks at the file system once.
//
// The folder is bounded by capacity_bytes: past it, the writer deletes the least recently used
// blocks this process knows of, down to 90%. With several processes the bound holds per
// process' view (each evicts what it knows); document the smallest setting as the bound.
//
// Loads are synchronous (Load(): one open, one pread of the header, one preadv of the payload
// straight into the pool's segments; no staging copy). Thread-safety: every method may be called
// from any thread; the writer thread is the tier's own (I/O, not compute: outside the pool).
#pragma once

#include <sys/stat.h>
#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/block_tier.h"
#include "core/status.h"
#include "tier/tier.h"

namespace radixlm::tier {

struct DiskTierConfig {
  std::string dir;                 // the cache folder (created if missing)
  int64_t capacity_bytes = 0;      // > 0
  std::string fingerprint;         // the model fingerprint's canonical text
  int32_t block_tokens = 16;
  uint64_t block_bytes = 0;        // payload bytes of one block (the pool's KvStore::BytesPerBlock)
  uint64_t state_bytes = 0;        // hybrid models: bytes of one recurrent state (0: none stored)
  bool fsync = false;              // fdatasync each file before its rename (power-loss durability)
  uint64_t max_queued_bytes = uint64_t{256} << 20;  // writes waiting; beyond: a store is skipped
};

struct DiskTierStats {
  int64_t blocks = 0, used_bytes = 0, capacity_bytes = 0;
  int64_t loads = 0, loaded_blocks = 0, bytes_read = 0;
  int64_t stores = 0, written_blocks = 0, bytes_written = 0, skipped_stores = 0, write_errors = 0;
  int64_t failed_missing = 0, failed_corrupt = 0, failed_io = 0;  // loads that failed, by reason
  int64_t evicted_blocks = 0, found_on_disk = 0;  // found_on_disk: other processes' blocks found by a probe
  int64_t queued_bytes = 0;
  double load_seconds = 0;
};

class DiskTier final : public Tier {
 public:
  // Creates or opens the folder for this fingerprint and lists its blocks. Errors: the folder
  // cannot be created or written, a bad configuration.
  static core::StatusOr<std::unique_ptr<DiskTier>> Open(DiskTierConfig config);
  // Writes every queued block, then stops the writer (a SIGTERM loses nothing queued).
  ~DiskTier() override;

  std::string medium() const override { return "disk"; }
  const cache::BlockHasher& hasher() const override { return hasher_; }
  bool Contains(const cache::TierKey& key) const override;
  std::vector<cache::TierState> StatesAfter(const cache::TierKey& parent) const override;
  cache::TierReport Report() const override;
  void ReportDrops() override;
  std::vector<cache::TierDrops> TakeDropped() override;

  // Reads block `key` into dst (the pool's segments of one block, block_bytes in all); true when
  // it arrived whole and verified. A file that fails a check is deleted.
  bool Load(const cache::TierKey& key, std::span<const iovec> dst) override;
  // Copies the block's bytes now and writes them behind (skipped when the queue is full).
  void Store(const cache::TierKey& key, std::span<const iovec> segments) override;
  // Hybrid models: a recurrent state (state_bytes) after `tail` tokens past block `parent`, with
  // the KV block of those tokens when tail > 0 (state_bytes + block_bytes in all), in
  // ssm/<ab>/<key>.st; found by StatesAfter(parent), loaded whole by LoadState.
  void StoreState(const cache::TierKey& key, const cache::TierKey& parent, int32_t tail,
                  std::span<const iovec> segments) override;
  bool LoadState(const cache::TierKey& key, std::span<const iovec> dst) override;
  // Waits until every queued write is on disk (tests, shutdown).
  void Flush() override;

  DiskTierStats stats() const;
  const std::string& path() const { return root_; }          // <dir>/v1/<fp>
  const std::string& fingerprint_hex() const { return fp_hex_; }
  const DiskTierConfig& config() const { return config_; }
  std::string BlockPath(const cache::TierKey& key) const;

 private:
  explicit DiskTier(DiskTierConfig config);
  core::Status Init();
  void Scan();                       // rebuilds the index from kv/, removes dead writers' tmp files
  enum class LoadResult { kOk, kQueued, kMissing, kCorrupt, kIoError };
  struct StateInfo {
    cache::TierKey parent{};
    int32_t tail = 0;
  };
  std::string PathOf(bool state, const cache::TierKey& key) const;
  // The file's folder (kv/<ab> or ssm/<ab>) as an open descriptor (-1: absent, or not a plain
  // folder); create: make it first. Every file of the tier is opened relative to these, with
  // O_NOFOLLOW and O_NONBLOCK, and used only when fstat says it is a regular file: a symlink,
  // FIFO or device planted in the folder is skipped, never followed or waited on.
  int ShardFd(bool state, const cache::TierKey& key, bool create) const;
  static std::string FileName(bool state, const cache::TierKey& key);
  // A regular file's descriptor (read-only), or -1.
  static int OpenRegular(int dir_fd, const std::string& name, struct stat* st);
  bool LoadQueued(const cache::TierKey& key, std::span<const iovec> dst);  // from the write queue
  // A block's (or state's) file into dst, checked (size, header, kind, key, fingerprint, CRC).
  LoadResult ReadFile(bool state, const cache::TierKey& key, std::span<const iovec> dst, int64_t* file_bytes) const;
  bool LoadFile(bool state, const cache::TierKey& key, std::span<const iovec> dst);
  void Enqueue(const cache::TierKey& key, const StateInfo* state, std::span<const iovec> segments, size_t n);
  void WriterLoop();
  struct Pending {
    cache::TierKey key;
    bool state = false;
    StateInfo info;
    std::vector<uint8_t> file;       // header + payload
  };
  bool WriteFile(const Pending& p);  // writer thread
  void EvictOverCapacity();          // writer thread, mu_ not held
  // The index: key -> (bytes on disk, LRU position).
  struct Entry {
    int64_t bytes = 0;
    std::list<cache::TierKey>::iterator lru;
    bool state = false;
    cache::TierKey parent{};
  };
  struct KeyHash {
    size_t operator()(const cache::TierKey& k) const;
  };
  void IndexLocked(const cache::TierKey& key, int64_t bytes, const StateInfo* state) const;
  void DropLocked(const cache::TierKey& key) const;

  DiskTierConfig config_;
  cache::BlockHasher hasher_;
  cache::BlockDigest fp_digest_{};
  std::string fp_hex_, root_;
  int root_fd_ = -1, tmp_fd_ = -1;
  int dir_fd_[2] = {-1, -1};  // kv/, ssm/
  mutable std::mutex mu_;
  std::condition_variable cv_, drained_;
  mutable std::unordered_map<cache::TierKey, Entry, KeyHash> index_;
  mutable std::list<cache::TierKey> lru_;  // least recently used first
  mutable std::unordered_map<cache::TierKey, std::vector<cache::TierState>, KeyHash> states_by_parent_;
  mutable int64_t used_bytes_ = 0;
  std::deque<std::shared_ptr<Pending>> queue_;
  // Queued or being written: a load of one of these reads its bytes from memory.
  std::unordered_map<cache::TierKey, std::shared_ptr<Pending>, KeyHash> in_flight_;
  uint64_t queued_bytes_ = 0;
  bool stop_ = false;
  bool writing_ = false;             // the writer holds a block (written, not yet evicted for)
  uint64_t tmp_seq_ = 0;
  mutable DiskTierStats stats_;
  bool report_drops_ = false;
  mutable std::vector<cache::TierKey> dropped_;
  std::thread writer_;
};

// The 64-hex-digit name of a digest, and back (false: not exactly Hex's spelling of one).
std::string Hex(const cache::BlockDigest& d);
bool ParseHex(const std::string& s, cache::TierKey* key);

}  // namespace radixlm::tier
