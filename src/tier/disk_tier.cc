#include "tier/disk_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "core/crc32c.h"
#include "tier/block_record.h"

namespace radixlm::tier {
namespace {

constexpr size_t kHeaderBytes = kRecordHeaderBytes;
using Header = RecordHeader;

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

core::Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return core::Status::Ok();
  return core::IoError("cannot create the cache folder " + path + ": " + std::strerror(errno));
}

// `name` inside dir_fd, made if absent, opened as a folder that is not a symlink.
core::StatusOr<int> OpenSubdir(int dir_fd, const std::string& name, const std::string& shown) {
  if (mkdirat(dir_fd, name.c_str(), 0700) != 0 && errno != EEXIST)
    return core::IoError("cannot create the cache folder " + shown + ": " + std::strerror(errno));
  const int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return core::IoError("the cache folder " + shown + " is not a plain folder (a symlink or a file?): " + std::strerror(errno));
  return fd;
}

// Full write of n bytes (short writes continue).
bool WriteAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

bool ParseHex(const std::string& s, cache::TierKey* key) {
  if (s.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    unsigned v = 0;
    if (sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) return false;
    (*key)[i] = static_cast<uint8_t>(v);
  }
  return Hex(*key) == s;
}

std::string Hex(const cache::BlockDigest& d) {
  static const char* digits = "0123456789abcdef";
  std::string s(64, '0');
  for (size_t i = 0; i < 32; ++i) {
    s[2 * i] = digits[d[i] >> 4];
    s[2 * i + 1] = digits[d[i] & 15];
  }
  return s;
}

size_t DiskTier::KeyHash::operator()(const cache::TierKey& k) const {
  size_t h;
  std::memcpy(&h, k.data(), sizeof h);
  return h;
}

DiskTier::DiskTier(DiskTierConfig config)
    : config_(std::move(config)), hasher_(config_.block_tokens, "radixlm-tier/1:" + config_.fingerprint) {
  SHA256(reinterpret_cast<const uint8_t*>(config_.fingerprint.data()), config_.fingerprint.size(), fp_digest_.data());
  fp_hex_ = Hex(fp_digest_);
}

core::StatusOr<std::unique_ptr<DiskTier>> DiskTier::Open(DiskTierConfig config) {
  if (config.dir.empty()) return core::InvalidArgument("the cache folder is empty");
  if (config.capacity_bytes <= 0) return core::InvalidArgument("the disk tier's capacity must be positive");
  if (config.block_bytes == 0 || config.block_tokens <= 0) return core::InvalidArgument("the disk tier needs the block size");
  std::unique_ptr<DiskTier> t(new DiskTier(std::move(config)));
  RADIXLM_RETURN_IF_ERROR(t->Init());
  return t;
}

core::Status DiskTier::Init() {
  root_ = config_.dir + "/v1/" + fp_hex_.substr(0, 32);
  // The folder the user named may be a symlink; nothing inside it may be (a link planted there
  // would send every block elsewhere).
  RADIXLM_RETURN_IF_ERROR(MakeDir(config_.dir));
  const int top = open(config_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (top < 0) return core::IoError("cannot open the cache folder " + config_.dir + ": " + std::strerror(errno));
  auto v1 = OpenSubdir(top, "v1", config_.dir + "/v1");
  close(top);
  if (!v1.ok()) return v1.status();
  auto root = OpenSubdir(*v1, fp_hex_.substr(0, 32), root_);
  close(*v1);
  if (!root.ok()) return root.status();
  root_fd_ = *root;
  for (auto [fd, name] : {std::pair<int*, const char*>{&dir_fd_[0], "kv"}, {&dir_fd_[1], "ssm"}, {&tmp_fd_, "tmp"}}) {
    auto d = OpenSubdir(root_fd_, name, root_ + "/" + name);
    if (!d.ok()) return d.status();
    *fd = *d;
  }
  // The manifest: written once, by whoever comes first (the same text for the same digest).
  struct stat st;
  if (fstatat(root_fd_, "MANIFEST", &st, AT_SYMLINK_NOFOLLOW) != 0) {
    const std::string tmp = "manifest." + std::to_string(getpid());
    const int fd = openat(tmp_fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return core::IoError("cannot write to the cache folder " + root_ + ": " + std::strerror(errno));
    const bool ok = WriteAll(fd, reinterpret_cast<const uint8_t*>(config_.fingerprint.data()), config_.fingerprint.size());
    close(fd);
    if (!ok || renameat(tmp_fd_, tmp.c_str(), root_fd_, "MANIFEST") != 0) {
      unlinkat(tmp_fd_, tmp.c_str(), 0);
      return core::IoError("cannot write to the cache folder " + root_ + ": " + std::strerror(errno));
    }
  }
  Scan();
  writer_ = std::thread([this] { WriterLoop(); });
  return core::Status::Ok();
}

std::string DiskTier::FileName(bool state, const cache::TierKey& key) { return Hex(key) + (state ? ".st" : ".kv"); }

int DiskTier::ShardFd(bool state, const cache::TierKey& key, bool create) const {
  const std::string shard = Hex(key).substr(0, 2);
  if (create) mkdirat(dir_fd_[state], shard.c_str(), 0700);
  return openat(dir_fd_[state], shard.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

int DiskTier::OpenRegular(int dir_fd, const std::string& name, struct stat* st) {
  const int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
    close(fd);
    return -1;
  }
  return fd;
}

void DiskTier::Scan() {
  // Writes of processes that are gone: never renamed, never readable; remove them.
  if (DIR* d = fdopendir(dup(tmp_fd_))) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      // "<pid>.<n>" (a block) or "manifest.<pid>": keep a live process's (not ours: we wrote none yet).
      const bool manifest = name.rfind("manifest.", 0) == 0;
      const long owner = std::strtol(name.c_str() + (manifest ? 9 : 0), nullptr, 10);
      if (owner > 0 && owner != getpid() && (kill(static_cast<pid_t>(owner), 0) == 0 || errno == EPERM)) continue;
      unlinkat(dirfd(d), name.c_str(), 0);
    }
    closedir(d);
  }
  // Blocks and states, oldest first by modification time: the LRU order a restart starts from.
  struct Found {
    int64_t mtime, bytes;
    cache::TierKey key;
    bool state;
    StateInfo info;
  };
  std::vector<Found> found;
  for (const bool state : {false, true}) {
    const std::string ext = state ? ".st" : ".kv";
    DIR* top = fdopendir(dup(dir_fd_[state]));
    if (!top) continue;
    while (dirent* sub = readdir(top)) {
      if (sub->d_name[0] == '.') continue;
      const int sub_fd = openat(dirfd(top), sub->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      DIR* d = sub_fd >= 0 ? fdopendir(sub_fd) : nullptr;
      if (!d) {
        if (sub_fd >= 0) close(sub_fd);
        continue;
      }
      while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        Found f{0, 0, {}, state, {}};
        struct stat st;
        if (name.size() != 67 || name.substr(64) != ext || !ParseHex(name.substr(0, 64), &f.key)) continue;
        const int fd = OpenRegular(dirfd(d), name, &st);  // no FIFO, device or symlink is waited on
        if (fd < 0) continue;
        Header h{};
        const bool ok = !state || (pread(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h) && h.kind == 1 &&
                                   h.tail < static_cast<uint32_t>(config_.block_tokens));
        close(fd);
        if (!ok) continue;  // a state's parent and tail are in its header (a bad one is dropped)
        if (state) {
          std::memcpy(f.info.parent.data(), h.parent, 32);
          f.info.tail = static_cast<int32_t>(h.tail);
        }
        f.mtime = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
        f.bytes = st.st_size;
        found.push_back(f);
      }
      closedir(d);
    }
    closedir(top);
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  std::lock_guard<std::mutex> lock(mu_);
  for (const Found& f : found) IndexLocked(f.key, f.bytes, f.state ? &f.info : nullptr);
}

std::string DiskTier::BlockPath(const cache::TierKey& key) const { return PathOf(false, key); }

std::string DiskTier::PathOf(bool state, const cache::TierKey& key) const {
  const std::string hex = Hex(key);
  return root_ + (state ? "/ssm/" : "/kv/") + hex.substr(0, 2) + "/" + hex + (state ? ".st" : ".kv");
}

void DiskTier::IndexLocked(const cache::TierKey& key, int64_t bytes, const StateInfo* state) const {
  auto it = index_.find(key);
  if (it != index_.end()) {
    lru_.splice(lru_.end(), lru_, it->second.lru);  // most recent
    return;
  }
  lru_.push_back(key);
  Entry& e = index_[key];
  e.bytes = bytes;
  e.lru = std::prev(lru_.end());
  if (state) {
    e.state = true;
    e.parent = state->parent;
    states_by_parent_[state->parent].push_back({state->tail, key});
  }
  used_bytes_ += bytes;
}

void DiskTier::DropLocked(const cache::TierKey& key) const {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  if (report_drops_ && !it->second.state) dropped_.push_back(key);
  if (it->second.state) {
    auto& v = states_by_parent_[it->second.parent];
    std::erase_if(v, [&](const cache::TierState& s) { return s.key == key; });
    if (v.empty()) states_by_parent_.erase(it->second.parent);
  }
  used_bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  index_.erase(it);
}

bool DiskTier::Contains(const cache::TierKey& key) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (index_.count(key) || in_flight_.count(key)) return true;
  }
  // Another process may have written it since the scan.
  struct stat st;
  const int shard = ShardFd(false, key, false);
  const bool found = shard >= 0 && fstatat(shard, FileName(false, key).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                     S_ISREG(st.st_mode);
  if (shard >= 0) close(shard);
  if (!found) return false;
  std::lock_guard<std::mutex> lock(mu_);
  IndexLocked(key, st.st_size, nullptr);
  ++stats_.found_on_disk;
  return true;
}

bool DiskTier::LoadQueued(const cache::TierKey& key, std::span<const iovec> dst) {
  std::shared_ptr<Pending> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_flight_.find(key);
    if (it == in_flight_.end()) return false;
    p = it->second;
  }
  const uint8_t* src = p->file.data() + kHeaderBytes;
  for (const iovec& v : dst) {
    std::memcpy(v.iov_base, src, v.iov_len);
    src += v.iov_len;
  }
  return true;
}

namespace {

// Reads [offset, offset + sum of dst) of fd into dst (preadv takes at most IOV_MAX segments).
size_t ReadInto(int fd, std::span<const iovec> dst, size_t offset) {
  size_t done = 0;
  std::vector<iovec> rest(dst.begin(), dst.end());
  size_t first = 0;
  while (first < rest.size()) {
    const int n = static_cast<int>(std::min<size_t>(rest.size() - first, IOV_MAX));
    const ssize_t r = preadv(fd, rest.data() + first, n, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    done += static_cast<size_t>(r);
    size_t left = static_cast<size_t>(r);
    while (first < rest.size() && left >= rest[first].iov_len) left -= rest[first++].iov_len;
    if (left > 0) {
      rest[first].iov_base = static_cast<uint8_t*>(rest[first].iov_base) + left;
      rest[first].iov_len -= left;
    }
  }
  return done;
}

}  // namespace

DiskTier::LoadResult DiskTier::ReadFile(bool state, const cache::TierKey& key, std::span<const iovec> dst,
                                        int64_t* file_bytes) const {
  size_t want = 0;
  for (const iovec& v : dst) want += v.iov_len;
  const int shard = ShardFd(state, key, false);
  struct stat st;
  const int fd = shard >= 0 ? OpenRegular(shard, FileName(state, key), &st) : -1;
  if (shard >= 0) close(shard);
  if (fd < 0) return LoadResult::kMissing;
  Header h;
  const bool header_ok = pread(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h) &&
                         HeaderMatches(h, fp_digest_, config_.block_tokens, state, key, want) &&
                         static_cast<uint64_t>(st.st_size) == kHeaderBytes + want;
  const size_t done = header_ok ? ReadInto(fd, dst, kHeaderBytes) : 0;
  close(fd);
  if (!header_ok) return LoadResult::kCorrupt;
  if (done != want) return LoadResult::kIoError;
  if (!CrcMatches(h, dst)) return LoadResult::kCorrupt;
  *file_bytes = st.st_size;
  return LoadResult::kOk;
}

bool DiskTier::Load(const cache::TierKey& key, std::span<const iovec> dst) {
  size_t want = 0;
  for (const iovec& v : dst) want += v.iov_len;
  RADIXLM_CHECK_MSG(want == config_.block_bytes, "a block load's segments do not add up to a block");
  return LoadFile(false, key, dst);
}

bool DiskTier::LoadState(const cache::TierKey& key, std::span<const iovec> dst) {
  size_t want = 0;
  for (const iovec& v : dst) want += v.iov_len;
  RADIXLM_CHECK_MSG(want == config_.state_bytes || want == config_.state_bytes + config_.block_bytes,
                    "a state load's segments are not a state (and a block)");
  return LoadFile(true, key, dst);
}

bool DiskTier::LoadFile(bool state, const cache::TierKey& key, std::span<const iovec> dst) {
  const double t0 = Now();
  size_t want = 0;
  for (const iovec& v : dst) want += v.iov_len;
  int64_t file_bytes = 0;
  // Still queued or being written: the bytes are in memory.
  const LoadResult r = LoadQueued(key, dst) ? LoadResult::kQueued : ReadFile(state, key, dst, &file_bytes);
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.loads;
  stats_.load_seconds += Now() - t0;
  switch (r) {
    case LoadResult::kOk:
      IndexLocked(key, file_bytes, nullptr);  // a hit: most recently used (a state file is indexed already)
      stats_.bytes_read += static_cast<int64_t>(want);
      [[fallthrough]];
    case LoadResult::kQueued:
      ++stats_.loaded_blocks;
      return true;
    case LoadResult::kMissing:
      ++stats_.failed_missing;
      break;
    case LoadResult::kIoError:
      ++stats_.failed_io;
      break;
    case LoadResult::kCorrupt:
      ++stats_.failed_corrupt;
      if (const int shard = ShardFd(state, key, false); shard >= 0) {  // never used again; the recompute writes it anew
        unlinkat(shard, FileName(state, key).c_str(), 0);
        close(shard);
      }
      break;
  }
  DropLocked(key);
  return false;
}

void DiskTier::Store(const cache::TierKey& key, std::span<const iovec> segments) {
  size_t n = 0;
  for (const iovec& v : segments) n += v.iov_len;
  RADIXLM_CHECK_MSG(n == config_.block_bytes, "a block store's segments do not add up to a block");
  Enqueue(key, nullptr, segments, n);
}

void DiskTier::StoreState(const cache::TierKey& key, const cache::TierKey& parent, int32_t tail,
                          std::span<const iovec> segments) {
  size_t n = 0;
  for (const iovec& v : segments) n += v.iov_len;
  RADIXLM_CHECK_MSG(n == config_.state_bytes + (tail > 0 ? config_.block_bytes : 0),
                    "a state store's segments are not a state (and its partial block)");
  const StateInfo info{parent, tail};
  Enqueue(key, &info, segments, n);
}

void DiskTier::Enqueue(const cache::TierKey& key, const StateInfo* state, std::span<const iovec> segments, size_t n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.stores;
    if (index_.count(key) || in_flight_.count(key)) return;
    if (queued_bytes_ + kHeaderBytes + n > config_.max_queued_bytes) {
      ++stats_.skipped_stores;
      return;
    }
  }
  auto p = std::make_shared<Pending>();
  p->key = key;
  p->state = state != nullptr;
  if (state) p->info = *state;
  p->file.resize(kHeaderBytes + n);
  uint8_t* out = p->file.data() + kHeaderBytes;
  for (const iovec& v : segments) {
    std::memcpy(out, v.iov_base, v.iov_len);
    out += v.iov_len;
  }
  std::lock_guard<std::mutex> lock(mu_);
  queued_bytes_ += p->file.size();
  in_flight_[key] = p;
  queue_.push_back(std::move(p));
  cv_.notify_one();
}

bool DiskTier::WriteFile(const Pending& p) {
  // The header and checksum are made here, off the engine's thread.
  auto& file = const_cast<std::vector<uint8_t>&>(p.file);
  SealRecord(fp_digest_, config_.block_tokens, {.key = p.key, .state = p.state, .parent = p.info.parent, .tail = p.info.tail},
             file);
  const std::string tmp = std::to_string(getpid()) + "." + std::to_string(++tmp_seq_);
  const int fd = openat(tmp_fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = WriteAll(fd, file.data(), file.size());
  if (ok && config_.fsync) ok = fdatasync(fd) == 0;
  ok = close(fd) == 0 && ok;
  if (ok) {
    // The first writer of a key publishes; a later one's bytes are the same.
    const int shard = ShardFd(p.state, p.key, true);
    ok = shard >= 0 && (renameat2(tmp_fd_, tmp.c_str(), shard, FileName(p.state, p.key).c_str(), RENAME_NOREPLACE) == 0 ||
                        errno == EEXIST);
    if (shard >= 0) close(shard);
  }
  unlinkat(tmp_fd_, tmp.c_str(), 0);  // after a rename: gone already (ENOENT)
  return ok;
}

void DiskTier::EvictOverCapacity() {
  std::vector<std::pair<bool, cache::TierKey>> victims;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (used_bytes_ <= config_.capacity_bytes) return;
    const int64_t target = config_.capacity_bytes / 10 * 9;
    for (auto it = lru_.begin(); it != lru_.end() && used_bytes_ > target;) {
      const cache::TierKey key = *it++;
      victims.push_back({index_.at(key).state, key});
      DropLocked(key);
      ++stats_.evicted_blocks;
    }
  }
  for (const auto& [state, key] : victims) {
    if (const int shard = ShardFd(state, key, false); shard >= 0) {
      unlinkat(shard, FileName(state, key).c_str(), 0);
      close(shard);
    }
  }
}

void DiskTier::WriterLoop() {
  for (;;) {
    std::shared_ptr<Pending> p;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) {
        drained_.notify_all();
        if (stop_) return;
        continue;
      }
      p = queue_.front();
      writing_ = true;
    }
    const bool ok = WriteFile(*p);
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.pop_front();
      queued_bytes_ -= p->file.size();
      in_flight_.erase(p->key);
      if (ok) {
        IndexLocked(p->key, static_cast<int64_t>(p->file.size()), p->state ? &p->info : nullptr);
        ++stats_.written_blocks;
        stats_.bytes_written += static_cast<int64_t>(p->file.size());
      } else {
        ++stats_.write_errors;
        if (report_drops_) dropped_.push_back(p->key);  // announced when queued: take it back
      }
    }
    EvictOverCapacity();
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (queue_.empty()) drained_.notify_all();
  }
}

void DiskTier::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  drained_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

DiskTier::~DiskTier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  for (int fd : {root_fd_, tmp_fd_, dir_fd_[0], dir_fd_[1]})
    if (fd >= 0) close(fd);
}

std::vector<cache::TierState> DiskTier::StatesAfter(const cache::TierKey& parent) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_by_parent_.find(parent);
  std::vector<cache::TierState> out = it == states_by_parent_.end() ? std::vector<cache::TierState>{} : it->second;
  for (const auto& [key, p] : in_flight_)  // queued ones too
    if (p->state && p->info.parent == parent) out.push_back({p->info.tail, key});
  return out;
}

cache::TierReport DiskTier::Report() const {
  const DiskTierStats s = stats();
  cache::TierReport r;
  r.medium = medium();
  r.path = root_;
  r.fingerprint = fp_hex_.substr(0, 16);
  r.io = "pread";
  r.shared = true;
  r.blocks = s.blocks;
  r.used_bytes = s.used_bytes;
  r.capacity_bytes = s.capacity_bytes;
  r.loaded_blocks = s.loaded_blocks;
  r.bytes_read = s.bytes_read;
  r.written_blocks = s.written_blocks;
  r.bytes_written = s.bytes_written;
  r.failed_loads = s.failed_missing + s.failed_corrupt + s.failed_io;
  r.skipped_stores = s.skipped_stores;
  r.evicted_blocks = s.evicted_blocks;
  r.load_seconds = s.load_seconds;
  return r;
}

void DiskTier::ReportDrops() {
  std::lock_guard<std::mutex> lock(mu_);
  report_drops_ = true;
}

std::vector<cache::TierDrops> DiskTier::TakeDropped() {
  std::lock_guard<std::mutex> lock(mu_);
  if (dropped_.empty()) return {};
  return {{medium(), std::exchange(dropped_, {})}};
}

DiskTierStats DiskTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  DiskTierStats s = stats_;
  s.blocks = static_cast<int64_t>(index_.size());
  s.used_bytes = used_bytes_;
  s.capacity_bytes = config_.capacity_bytes;
  s.queued_bytes = static_cast<int64_t>(queued_bytes_);
  return s;
}

}  // namespace radixlm::tier
