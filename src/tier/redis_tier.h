// The remote tier under the KV pool: blocks in a Redis server (Debian's redis-server 7) shared by
// every replica that names the same server and the same model fingerprint, through Debian's
// hiredis (the client library; no home-made network store).
//
// In Redis: one value per block, "radixlm:v1:<fp>:kv:<key>" = a record (tier/block_record.h:
// the header with the fingerprint digest, the key and CRC-32C, then the pool's bytes); a hybrid
// model's state "radixlm:v1:<fp>:st:<key>" (state + the KV of its partial block), indexed by its
// parent block in the set "radixlm:v1:<fp>:after:<parent>" of "<tail>:<key>" members. <fp> is the
// fingerprint digest's first 32 hex digits and the fingerprint seeds every key, as on disk, so
// replicas of one model share blocks and nothing else. Eviction is Redis's own
// (maxmemory-policy allkeys-lru): the tier never deletes a block but a corrupt one.
//
// Writes are behind the caller: Store() copies the bytes into a bounded queue (beyond it a store
// is skipped and counted) and one writer thread SETs them on its own connection. Loads are
// synchronous and pipelined: LoadMany sends the GETs of an admission's blocks 16 at a time, each
// window before reading its first reply; ContainsMany probes a match's blocks in one pipeline
// of EXISTS (a hint, as for every tier).
//
// Attach across replicas: MarkComputing SETs "radixlm:v1:<fp>:busy:<key>" = "<owner> <tokens/s>"
// with a PX expiry for each key, ClearComputing DELs them, both through the writer's queue
// (behind the stores made before them, so a mark goes only after its blocks are in Redis);
// ComputingElsewhere GETs a key's mark and ignores this tier's own (<owner>: 16 random hex
// digits per tier). A marker that dies leaves marks that expire with their TTL. A clear
// deletes the key whoever set it last (two replicas computing one block both cleared it).
//
// Failure is never an error to a request: the server down, slow (every call has a timeout),
// full (OOM replies) or returning a value that fails its checks makes a load or a probe fail
// (the engine recomputes the block) and a store be dropped, each counted (the first failure of
// an outage said on stderr); a broken connection is reopened on the next call (a writer's
// store is tried once more on it), and a connect that fails backs off, 0.1 s doubling to 5 s.
// Opening one sets SIGPIPE to ignored if it was the default (a server gone mid-write is then
// an I/O error, not the end of the process).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tier/block_record.h"
#include "tier/tier.h"

struct redisContext;  // hiredis's connection

namespace radixlm::tier {

// redis://[USER@]HOST[:PORT][/DB] or unix:///PATH[?db=DB], parsed.
struct RedisAddress {
  std::string host, unix_path, user;
  int port = 6379, db = 0;
  std::string Display() const;  // the URL without credentials
};
core::StatusOr<RedisAddress> ParseRedisUrl(const std::string& url);

struct RedisTierConfig {
  std::string url;                 // see ParseRedisUrl; rediss:// (TLS) is refused: Debian's hiredis 0.14 has no TLS
  std::string password;            // AUTH (with the URL's user: a Redis ACL user); "" none
  std::string fingerprint;
  int32_t block_tokens = 16;
  uint64_t block_bytes = 0;
  uint64_t state_bytes = 0;
  double timeout_seconds = 1.0;    // per call (connect, each reply)
  uint64_t max_queued_bytes = uint64_t{256} << 20;
};

class RedisConnection;

class RedisTier final : public Tier {
 public:
  // Parses the address and tries a first connection; a server that is down is not an error
  // (the tier retries), a malformed URL or configuration is.
  static core::StatusOr<std::unique_ptr<RedisTier>> Open(RedisTierConfig config);
  ~RedisTier() override;  // writes what is queued (bounded by the timeouts), then stops

  std::string medium() const override { return "remote"; }
  const cache::BlockHasher& hasher() const override { return hasher_; }
  bool Contains(const cache::TierKey& key) const override;
  // Every EXISTS sent before the first reply is read.
  std::vector<char> ContainsMany(std::span<const cache::TierKey> keys) const override;
  std::vector<cache::TierState> StatesAfter(const cache::TierKey& parent) const override;
  cache::TierReport Report() const override;
  void ReportDrops() override;
  std::vector<cache::TierDrops> TakeDropped() override;

  bool Load(const cache::TierKey& key, std::span<const iovec> dst) override;
  void LoadMany(std::span<const cache::TierKey> keys, std::span<const std::vector<iovec>> dst, std::span<char> ok) override;
  void Store(const cache::TierKey& key, std::span<const iovec> segments) override;
  void StoreState(const cache::TierKey& key, const cache::TierKey& parent, int32_t tail,
                  std::span<const iovec> segments) override;
  bool LoadState(const cache::TierKey& key, std::span<const iovec> dst) override;
  void Flush() override;
  bool SharesMarks() const override { return true; }
  void MarkComputing(std::span<const cache::TierKey> keys, double ttl_seconds, double tokens_per_second) override;
  void ClearComputing(std::span<const cache::TierKey> keys) override;
  std::optional<double> ComputingElsewhere(const cache::TierKey& key) const override;

  struct Stats {
    int64_t loaded_blocks = 0, bytes_read = 0, written_blocks = 0, bytes_written = 0;
    int64_t stores = 0, skipped_stores = 0, write_errors = 0;
    int64_t failed_missing = 0, failed_corrupt = 0, failed_io = 0;  // loads that failed, by reason
    int64_t probe_errors = 0, reconnects = 0;
    int64_t queued_bytes = 0;
    double load_seconds = 0;
  };
  Stats stats() const;
  const std::string& address() const { return display_; }

 private:
  explicit RedisTier(RedisTierConfig config, RedisAddress address);
  std::string KeyOf(bool state, const cache::TierKey& key) const;
  // Checks a value GET returned and copies its payload into dst.
  enum class Verdict { kOk, kMissing, kCorrupt };
  Verdict Accept(bool state, const cache::TierKey& key, const std::string* value, std::span<const iovec> dst) const;
  void Count(Verdict v, size_t bytes);
  void DropCorrupt(RedisConnection& c, bool state, const cache::TierKey& key);
  void Failed(size_t n, const char* why);
  struct Pending {
    std::string key, value, index_key, index_member;  // index_*: a state's entry in its parent's set
    RecordId id;
    // Marks instead of a record: SET each key to value with PX ttl_ms (ttl_ms 0: DEL each).
    std::vector<std::string> marks;
    int64_t ttl_ms = 0;
  };
  // Appends p's commands to c (sealing a record first); how many replies they owe.
  int AppendWrite(redisContext* c, Pending& p) const;
  void EnqueueMarks(std::span<const cache::TierKey> keys, std::string value, int64_t ttl_ms);
  void Enqueue(const cache::TierKey& key, bool state, const cache::TierKey& parent, int32_t tail, std::span<const iovec> segments);
  void WriterLoop();

  RedisTierConfig config_;
  RedisAddress address_;
  std::string display_, prefix_, owner_;
  cache::BlockHasher hasher_;
  cache::BlockDigest fp_digest_{};
  std::unique_ptr<RedisConnection> reader_, writer_conn_;  // each behind its own mutex
  mutable std::mutex mu_;                                  // stats_, queue_, dropped_
  std::condition_variable cv_, drained_;
  std::deque<Pending> queue_;
  uint64_t queued_bytes_ = 0;
  bool stop_ = false, writing_ = false, report_drops_ = false;
  mutable Stats stats_;
  mutable std::atomic<int64_t> reconnects_{0};  // connections made (the first included)
  double last_warning_ = -1e9;                   // when stderr last heard of a failure
  std::vector<cache::TierKey> dropped_;
  std::thread writer_;
};

}  // namespace radixlm::tier
