#include "tier/redis_tier.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <openssl/sha.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <utility>

#include "tier/block_record.h"
#include "tier/disk_tier.h"  // Hex

namespace radixlm::tier {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

timeval Timeval(double seconds) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(seconds);
  tv.tv_usec = static_cast<suseconds_t>((seconds - static_cast<double>(tv.tv_sec)) * 1e6);
  return tv;
}

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

bool ParseInt(const std::string& s, int lo, int hi, int* out) {
  if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  *out = std::stoi(s);
  return *out >= lo && *out <= hi;
}

}  // namespace

// One hiredis connection, reconnected on demand after a backoff; callers hold its mutex.
class RedisConnection {
 public:
  RedisConnection(const RedisAddress& a, std::string password, double timeout)
      : address_(a), password_(std::move(password)), timeout_(timeout) {}
  ~RedisConnection() { Close(); }
  std::mutex mu;

  // The live context, connecting first if needed and the backoff allows; null: unavailable now.
  redisContext* Get(std::atomic<int64_t>* reconnects) {
    if (ctx_) return ctx_;
    const double now = Now();
    if (now < next_try_) return nullptr;
    const timeval tv = Timeval(timeout_);
    redisContext* c = address_.unix_path.empty() ? redisConnectWithTimeout(address_.host.c_str(), address_.port, tv)
                                                 : redisConnectUnixWithTimeout(address_.unix_path.c_str(), tv);
    if (c && !c->err && redisSetTimeout(c, tv) == REDIS_OK && Handshake(c)) {
      ctx_ = c;
      backoff_ = 0.1;
      if (reconnects) ++*reconnects;
      return ctx_;
    }
    if (c) redisFree(c);
    next_try_ = now + backoff_;
    backoff_ = std::min(backoff_ * 2, 5.0);
    return nullptr;
  }
  // After an I/O or protocol error: the context is dropped and the next Get reconnects at once
  // (a server restarted since leaves a stale connection); failed connects back off.
  void Broken() { Close(); }

 private:
  bool Handshake(redisContext* c) {
    if (!password_.empty()) {
      Reply r(static_cast<redisReply*>(address_.user.empty()
                                           ? redisCommand(c, "AUTH %b", password_.data(), password_.size())
                                           : redisCommand(c, "AUTH %b %b", address_.user.data(), address_.user.size(),
                                                          password_.data(), password_.size())));
      if (!r || r->type == REDIS_REPLY_ERROR) return false;
    }
    if (address_.db != 0) {
      Reply r(static_cast<redisReply*>(redisCommand(c, "SELECT %d", address_.db)));
      if (!r || r->type == REDIS_REPLY_ERROR) return false;
    }
    return true;
  }
  void Close() {
    if (ctx_) redisFree(ctx_);
    ctx_ = nullptr;
  }
  RedisAddress address_;
  std::string password_;
  double timeout_;
  redisContext* ctx_ = nullptr;
  double next_try_ = 0, backoff_ = 0.1;
};

std::string RedisAddress::Display() const {
  if (!unix_path.empty()) return "unix://" + unix_path + (db ? "?db=" + std::to_string(db) : "");
  return "redis://" + host + ":" + std::to_string(port) + "/" + std::to_string(db);
}

core::StatusOr<RedisAddress> ParseRedisUrl(const std::string& url) {
  RedisAddress a;
  auto bad = [&](const std::string& why) { return core::InvalidArgument("--cache-remote '" + url + "': " + why); };
  if (url.rfind("rediss://", 0) == 0)
    return bad("TLS (rediss://) is not available: Debian 12's hiredis 0.14 has no TLS; reach the server over a "
               "private network or a tunnel (stunnel, ssh -L) with redis://");
  if (url.rfind("unix://", 0) == 0) {
    std::string rest = url.substr(7);
    if (const size_t q = rest.find("?db="); q != std::string::npos) {
      if (!ParseInt(rest.substr(q + 4), 0, 1 << 20, &a.db)) return bad("the database is not a number");
      rest.resize(q);
    }
    if (rest.empty() || rest[0] != '/') return bad("a unix socket needs an absolute path (unix:///run/redis.sock)");
    a.unix_path = rest;
    return a;
  }
  if (url.rfind("redis://", 0) != 0) return bad("expected redis://HOST[:PORT][/DB] or unix:///PATH");
  std::string rest = url.substr(8);
  if (const size_t at = rest.rfind('@'); at != std::string::npos) {
    a.user = rest.substr(0, at);
    if (a.user.find(':') != std::string::npos)
      return bad("put the password in --cache-remote-password-file, not in the URL");
    rest = rest.substr(at + 1);
  }
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    if (slash + 1 < rest.size() && !ParseInt(rest.substr(slash + 1), 0, 1 << 20, &a.db)) return bad("the database is not a number");
    rest.resize(slash);
  }
  std::string port;
  if (!rest.empty() && rest[0] == '[') {  // [IPv6]:port
    const size_t close = rest.find(']');
    if (close == std::string::npos) return bad("an IPv6 address needs its closing ']'");
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return bad("expected ':' after ']'");
      port = rest.substr(close + 2);
    }
    rest = rest.substr(1, close - 1);
  } else if (const size_t colon = rest.rfind(':'); colon != std::string::npos) {
    port = rest.substr(colon + 1);
    rest.resize(colon);
  }
  if (!port.empty() && !ParseInt(port, 1, 65535, &a.port)) return bad("the port is not in 1..65535");
  if (rest.empty()) return bad("no host");
  a.host = rest;
  return a;
}

RedisTier::RedisTier(RedisTierConfig config, RedisAddress address)
    : config_(std::move(config)),
      address_(std::move(address)),
      display_(address_.Display()),
      hasher_(config_.block_tokens, "radixlm-tier/1:" + config_.fingerprint) {
  SHA256(reinterpret_cast<const uint8_t*>(config_.fingerprint.data()), config_.fingerprint.size(), fp_digest_.data());
  prefix_ = "radixlm:v1:" + Hex(fp_digest_).substr(0, 32) + ":";
  std::random_device rd;
  char owner[17];
  std::snprintf(owner, sizeof owner, "%08x%08x", rd(), rd());
  owner_ = owner;
  reader_ = std::make_unique<RedisConnection>(address_, config_.password, config_.timeout_seconds);
  writer_conn_ = std::make_unique<RedisConnection>(address_, config_.password, config_.timeout_seconds);
}

core::StatusOr<std::unique_ptr<RedisTier>> RedisTier::Open(RedisTierConfig config) {
  RADIXLM_ASSIGN_OR_RETURN(RedisAddress address, ParseRedisUrl(config.url));
  if (config.block_bytes == 0 || config.block_tokens <= 0) return core::InvalidArgument("the remote tier needs the block size");
  if (!(config.timeout_seconds > 0)) return core::InvalidArgument("the remote tier's timeout must be positive");
  // hiredis writes with write(2): a server gone mid-write would raise SIGPIPE and end the
  // process. Ignored (EPIPE is then an I/O error the tier handles), unless someone handles it.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<RedisTier> t(new RedisTier(std::move(config), std::move(address)));
  {
    std::lock_guard<std::mutex> lock(t->reader_->mu);
    t->reader_->Get(&t->reconnects_);  // a first try; down is not an error
  }
  t->writer_ = std::thread([p = t.get()] { p->WriterLoop(); });
  return t;
}

RedisTier::~RedisTier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

std::string RedisTier::KeyOf(bool state, const cache::TierKey& key) const {
  return prefix_ + (state ? "st:" : "kv:") + Hex(key);
}

bool RedisTier::Contains(const cache::TierKey& key) const { return ContainsMany(std::span<const cache::TierKey>(&key, 1))[0]; }

std::vector<char> RedisTier::ContainsMany(std::span<const cache::TierKey> keys) const {
  std::vector<char> held(keys.size(), 0);
  if (keys.empty()) return held;
  std::lock_guard<std::mutex> lock(reader_->mu);
  redisContext* c = reader_->Get(&reconnects_);
  if (!c) return held;
  for (const cache::TierKey& key : keys) {
    const std::string k = KeyOf(false, key);
    redisAppendCommand(c, "EXISTS %b", k.data(), k.size());
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK || !raw) {
      reader_->Broken();
      std::fill(held.begin(), held.end(), 0);
      std::lock_guard<std::mutex> s(mu_);
      ++stats_.probe_errors;
      break;
    }
    Reply r(static_cast<redisReply*>(raw));
    held[i] = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
  }
  return held;
}

std::vector<cache::TierState> RedisTier::StatesAfter(const cache::TierKey& parent) const {
  if (config_.state_bytes == 0) return {};
  const std::string k = prefix_ + "after:" + Hex(parent);
  std::lock_guard<std::mutex> lock(reader_->mu);
  redisContext* c = reader_->Get(&reconnects_);
  if (!c) return {};
  Reply r(static_cast<redisReply*>(redisCommand(c, "SMEMBERS %b", k.data(), k.size())));
  std::vector<cache::TierState> out;
  if (!r || r->type != REDIS_REPLY_ARRAY) {
    if (!r) reader_->Broken();
    return out;
  }
  for (size_t i = 0; i < r->elements; ++i) {
    const redisReply* e = r->element[i];
    if (e->type != REDIS_REPLY_STRING) continue;
    const std::string m(e->str, e->len);
    const size_t colon = m.find(':');
    int tail = 0;
    cache::TierKey key{};
    // A member another writer spoiled is skipped (never parsed by a throwing reader).
    if (colon == std::string::npos || !ParseInt(m.substr(0, colon), 0, config_.block_tokens - 1, &tail) ||
        !ParseHex(m.substr(colon + 1), &key))
      continue;
    out.push_back({tail, key});
  }
  return out;
}

RedisTier::Verdict RedisTier::Accept(bool state, const cache::TierKey& key, const std::string* value,
                                     std::span<const iovec> dst) const {
  if (!value) return Verdict::kMissing;
  size_t want = 0;
  for (const iovec& v : dst) want += v.iov_len;
  RecordHeader h;
  if (value->size() != kRecordHeaderBytes + want) return Verdict::kCorrupt;
  std::memcpy(&h, value->data(), sizeof h);
  if (!HeaderMatches(h, fp_digest_, config_.block_tokens, state, key, want)) return Verdict::kCorrupt;
  const char* src = value->data() + kRecordHeaderBytes;
  for (const iovec& v : dst) {
    std::memcpy(v.iov_base, src, v.iov_len);
    src += v.iov_len;
  }
  return CrcMatches(h, dst) ? Verdict::kOk : Verdict::kCorrupt;
}

void RedisTier::Count(Verdict v, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (v == Verdict::kOk) {
    ++stats_.loaded_blocks;
    stats_.bytes_read += static_cast<int64_t>(bytes);
  } else if (v == Verdict::kMissing) {
    ++stats_.failed_missing;
  } else {
    ++stats_.failed_corrupt;
  }
}

// A value that fails its checks is deleted, so that no replica reads it again.
void RedisTier::DropCorrupt(RedisConnection& conn, bool state, const cache::TierKey& key) {
  const std::string k = KeyOf(state, key);
  if (redisContext* c = conn.Get(nullptr)) {
    Reply r(static_cast<redisReply*>(redisCommand(c, "DEL %b", k.data(), k.size())));
    if (!r) conn.Broken();
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (report_drops_ && !state) dropped_.push_back(key);
}

void RedisTier::LoadMany(std::span<const cache::TierKey> keys, std::span<const std::vector<iovec>> dst, std::span<char> ok) {
  std::fill(ok.begin(), ok.end(), 0);
  if (keys.empty()) return;
  const double t0 = Now();
  std::lock_guard<std::mutex> lock(reader_->mu);
  // Pipelined in windows of kWindow GETs: every GET of a window is sent before its first reply
  // is read, and the replies in flight stay bounded (a 16K-token prefix of a 0.6B model is
  // 1.8 GB).
  constexpr size_t kWindow = 16;
  for (size_t begin = 0; begin < keys.size(); begin += kWindow) {
    const size_t end = std::min(keys.size(), begin + kWindow);
    redisContext* c = reader_->Get(&reconnects_);
    if (!c) {
      Failed(end - begin, "the server is unreachable");
      continue;
    }
    for (size_t i = begin; i < end; ++i) {
      const std::string k = KeyOf(false, keys[i]);
      redisAppendCommand(c, "GET %b", k.data(), k.size());
    }
    for (size_t i = begin; i < end; ++i) {
      void* raw = nullptr;
      if (redisGetReply(c, &raw) != REDIS_OK || !raw) {
        Failed(end - i, c->errstr);
        reader_->Broken();
        break;
      }
      Reply r(static_cast<redisReply*>(raw));
      std::string value;
      const bool found = r->type == REDIS_REPLY_STRING;
      if (found) value.assign(r->str, r->len);
      const Verdict v = Accept(false, keys[i], found ? &value : nullptr, dst[i]);
      ok[i] = v == Verdict::kOk;
      size_t bytes = 0;
      for (const iovec& seg : dst[i]) bytes += seg.iov_len;
      Count(v, bytes);
      if (v == Verdict::kCorrupt) DropCorrupt(*reader_, false, keys[i]);
    }
  }
  std::lock_guard<std::mutex> s(mu_);
  stats_.load_seconds += Now() - t0;
}

// Loads that failed on the connection (counted; the first of each outage said on stderr).
void RedisTier::Failed(size_t n, const char* why) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.failed_io += static_cast<int64_t>(n);
  if (Now() - last_warning_ > 10) {
    last_warning_ = Now();
    std::fprintf(stderr, "radixlm: remote tier %s: %s (blocks recomputed; retrying)\n", display_.c_str(), why);
  }
}

bool RedisTier::Load(const cache::TierKey& key, std::span<const iovec> dst) {
  char ok = 0;
  std::vector<iovec> d(dst.begin(), dst.end());
  LoadMany(std::span<const cache::TierKey>(&key, 1), std::span<const std::vector<iovec>>(&d, 1), std::span<char>(&ok, 1));
  return ok;
}

bool RedisTier::LoadState(const cache::TierKey& key, std::span<const iovec> dst) {
  const std::string k = KeyOf(true, key);
  std::lock_guard<std::mutex> lock(reader_->mu);
  redisContext* c = reader_->Get(&reconnects_);
  Reply r(c ? static_cast<redisReply*>(redisCommand(c, "GET %b", k.data(), k.size())) : nullptr);
  if (!r) {
    Failed(1, c ? c->errstr : "the server is unreachable");
    if (c) reader_->Broken();
    return false;
  }
  std::string value;
  const bool found = r->type == REDIS_REPLY_STRING;
  if (found) value.assign(r->str, r->len);
  const Verdict v = Accept(true, key, found ? &value : nullptr, dst);
  size_t bytes = 0;
  for (const iovec& s : dst) bytes += s.iov_len;
  Count(v, bytes);
  if (v == Verdict::kCorrupt) DropCorrupt(*reader_, true, key);
  return v == Verdict::kOk;
}

void RedisTier::Enqueue(const cache::TierKey& key, bool state, const cache::TierKey& parent, int32_t tail,
                        std::span<const iovec> segments) {
  size_t n = 0;
  for (const iovec& v : segments) n += v.iov_len;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.stores;
    if (queued_bytes_ + kRecordHeaderBytes + n > config_.max_queued_bytes) {
      ++stats_.skipped_stores;
      return;
    }
    queued_bytes_ += kRecordHeaderBytes + n;
  }
  Pending p;
  p.id = {.key = key, .state = state, .parent = parent, .tail = tail};
  p.key = KeyOf(state, key);
  p.value.resize(kRecordHeaderBytes + n);
  char* out = p.value.data() + kRecordHeaderBytes;
  for (const iovec& v : segments) {
    std::memcpy(out, v.iov_base, v.iov_len);
    out += v.iov_len;
  }
  if (state) {
    p.index_key = prefix_ + "after:" + Hex(parent);
    p.index_member = std::to_string(tail) + ":" + Hex(key);
  }
  // The header is sealed by the writer thread, off the engine's.
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(p));
  cv_.notify_one();
}

void RedisTier::Store(const cache::TierKey& key, std::span<const iovec> segments) {
  Enqueue(key, false, {}, 0, segments);
}

void RedisTier::StoreState(const cache::TierKey& key, const cache::TierKey& parent, int32_t tail,
                           std::span<const iovec> segments) {
  if (config_.state_bytes == 0) return;
  Enqueue(key, true, parent, tail, segments);
}

int RedisTier::AppendWrite(redisContext* c, Pending& p) const {
  if (!p.marks.empty()) {
    for (const std::string& k : p.marks) {
      if (p.ttl_ms > 0)
        redisAppendCommand(c, "SET %b %b PX %lld", k.data(), k.size(), p.value.data(), p.value.size(),
                           static_cast<long long>(p.ttl_ms));
      else
        redisAppendCommand(c, "DEL %b", k.data(), k.size());
    }
    return static_cast<int>(p.marks.size());
  }
  SealRecord(fp_digest_, config_.block_tokens, p.id, std::span<uint8_t>(reinterpret_cast<uint8_t*>(p.value.data()), p.value.size()));
  redisAppendCommand(c, "SET %b %b", p.key.data(), p.key.size(), p.value.data(), p.value.size());
  if (!p.id.state) return 1;
  redisAppendCommand(c, "SADD %b %b", p.index_key.data(), p.index_key.size(), p.index_member.data(), p.index_member.size());
  return 2;
}

void RedisTier::WriterLoop() {
  for (;;) {
    Pending p;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      p = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
    }
    bool ok = false;
    {
      std::lock_guard<std::mutex> lock(writer_conn_->mu);
      bool broken = true;
      for (int attempt = 0; attempt < 2 && broken; ++attempt) {  // again once on a fresh connection
        redisContext* c = writer_conn_->Get(&reconnects_);
        if (!c) break;
        const int replies = AppendWrite(c, p);
        ok = true;
        broken = false;
        for (int i = 0; i < replies; ++i) {
          void* raw = nullptr;
          if (redisGetReply(c, &raw) != REDIS_OK || !raw) {
            writer_conn_->Broken();
            ok = false;
            broken = true;
            break;
          }
          Reply r(static_cast<redisReply*>(raw));
          if (r->type == REDIS_REPLY_ERROR) ok = false;  // OOM (maxmemory with noeviction), ACL, ...
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (p.marks.empty()) queued_bytes_ -= p.value.size();
    writing_ = false;
    if (!ok) ++stats_.write_errors;
    else if (p.marks.empty()) {
      ++stats_.written_blocks;
      stats_.bytes_written += static_cast<int64_t>(p.value.size());
    }
    if (queue_.empty()) drained_.notify_all();
  }
}

void RedisTier::EnqueueMarks(std::span<const cache::TierKey> keys, std::string value, int64_t ttl_ms) {
  if (keys.empty()) return;
  Pending p;
  for (const cache::TierKey& key : keys) p.marks.push_back(prefix_ + "busy:" + Hex(key));
  p.value = std::move(value);
  p.ttl_ms = ttl_ms;
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(p));
  cv_.notify_one();
}

void RedisTier::MarkComputing(std::span<const cache::TierKey> keys, double ttl_seconds, double tokens_per_second) {
  char value[64];
  std::snprintf(value, sizeof value, "%s %.3f", owner_.c_str(), std::max(tokens_per_second, 0.0));
  EnqueueMarks(keys, value, std::max<int64_t>(1, static_cast<int64_t>(ttl_seconds * 1000)));
}

void RedisTier::ClearComputing(std::span<const cache::TierKey> keys) { EnqueueMarks(keys, "", 0); }

std::optional<double> RedisTier::ComputingElsewhere(const cache::TierKey& key) const {
  const std::string k = prefix_ + "busy:" + Hex(key);
  std::lock_guard<std::mutex> lock(reader_->mu);
  redisContext* c = reader_->Get(&reconnects_);
  if (!c) return std::nullopt;
  Reply r(static_cast<redisReply*>(redisCommand(c, "GET %b", k.data(), k.size())));
  if (!r) {
    reader_->Broken();
    return std::nullopt;
  }
  if (r->type != REDIS_REPLY_STRING) return std::nullopt;
  const std::string v(r->str, r->len);
  const size_t space = v.find(' ');
  if (space != owner_.size() || v.compare(0, space, owner_) == 0) return std::nullopt;  // its own, or spoiled
  char* end = nullptr;
  const double rate = std::strtod(v.c_str() + space + 1, &end);
  if (end == v.c_str() + space + 1 || !(rate >= 0)) return std::nullopt;
  return rate;
}

void RedisTier::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  drained_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

cache::TierReport RedisTier::Report() const {
  const Stats s = stats();
  cache::TierReport r;
  r.medium = medium();
  r.path = display_;
  r.fingerprint = Hex(fp_digest_).substr(0, 16);
  r.io = "redis";
  r.shared = true;
  r.blocks = -1;  // Redis holds and evicts them; the tier does not count them
  r.loaded_blocks = s.loaded_blocks;
  r.bytes_read = s.bytes_read;
  r.written_blocks = s.written_blocks;
  r.bytes_written = s.bytes_written;
  r.failed_loads = s.failed_missing + s.failed_corrupt + s.failed_io;
  r.skipped_stores = s.skipped_stores + s.write_errors;
  r.load_seconds = s.load_seconds;
  return r;
}

void RedisTier::ReportDrops() {
  std::lock_guard<std::mutex> lock(mu_);
  report_drops_ = true;
}

std::vector<cache::TierDrops> RedisTier::TakeDropped() {
  std::lock_guard<std::mutex> lock(mu_);
  if (dropped_.empty()) return {};
  return {{medium(), std::exchange(dropped_, {})}};
}

RedisTier::Stats RedisTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.queued_bytes = static_cast<int64_t>(queued_bytes_);
  s.reconnects = reconnects_.load();
  return s;
}

}  // namespace radixlm::tier
