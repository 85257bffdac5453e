#include "tier/disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/crc32c.h"
#include "core/random.h"
#include "core/temp_dir_test.h"

namespace radixlm::tier {
namespace {

namespace fs = std::filesystem;

class DiskTierTest : public ::testing::Test {
 protected:
  DiskTierConfig Config(const std::string& fp = "model=a") const {
    return {.dir = dir_, .capacity_bytes = 1 << 20, .fingerprint = fp, .block_tokens = 4, .block_bytes = 3000};
  }
  // A block's payload in two segments (as the pool hands them: keys, then values).
  struct Block {
    std::vector<uint8_t> k, v;
    std::vector<iovec> Segments() { return {{k.data(), k.size()}, {v.data(), v.size()}}; }
  };
  static Block Random(uint64_t seed) {
    core::Rng rng(seed);
    Block b{std::vector<uint8_t>(1000), std::vector<uint8_t>(2000)};
    for (auto& x : b.k) x = static_cast<uint8_t>(rng.Below(256));
    for (auto& x : b.v) x = static_cast<uint8_t>(rng.Below(256));
    return b;
  }
  static cache::TierKey Key(const DiskTier& t, int i) {
    const std::vector<int32_t> tokens = {i, i + 1, i + 2, i + 3};
    return t.hasher().Next(nullptr, tokens, 0);
  }
  const core::TempDir tmp_{"radixlm_tier"};
  const std::string dir_ = tmp_.path();
};

TEST(Crc32cTest, HardwareEqualsTheTableAndKnownValues) {
  EXPECT_EQ(core::Crc32c("123456789", 9), 0xE3069283u);  // the CRC-32C check value
  core::Rng rng(3);
  std::vector<uint8_t> data(1000);
  for (auto& x : data) x = static_cast<uint8_t>(rng.Below(256));
  for (size_t n : {0, 1, 7, 8, 9, 63, 1000})
    EXPECT_EQ(core::Crc32c(data.data(), n), core::Crc32cExtendPortable(0, data.data(), n)) << n;
  EXPECT_EQ(core::Crc32cExtend(core::Crc32c(data.data(), 300), data.data() + 300, 700), core::Crc32c(data.data(), 1000));
}

TEST_F(DiskTierTest, RoundTripsABlockAcrossARestart) {
  Block b = Random(1);
  cache::TierKey key;
  {
    auto t = DiskTier::Open(Config());
    ASSERT_TRUE(t.ok()) << t.status().message();
    key = Key(**t, 1);
    EXPECT_FALSE((*t)->Contains(key));
    (*t)->Store(key, b.Segments());
    EXPECT_TRUE((*t)->Contains(key));  // queued counts
    Block in{std::vector<uint8_t>(1000), std::vector<uint8_t>(2000)};
    EXPECT_TRUE((*t)->Load(key, in.Segments()));  // from memory or disk, the same bytes
    EXPECT_EQ(in.k, b.k);
    EXPECT_EQ(in.v, b.v);
  }  // the destructor writes what is queued
  auto t = DiskTier::Open(Config());
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE((*t)->Contains(key)) << "the index is rebuilt from the folder";
  EXPECT_EQ((*t)->stats().blocks, 1);
  Block in{std::vector<uint8_t>(1000), std::vector<uint8_t>(2000)};
  ASSERT_TRUE((*t)->Load(key, in.Segments()));
  EXPECT_EQ(in.k, b.k);
  EXPECT_EQ(in.v, b.v);
  EXPECT_EQ((*t)->stats().bytes_read, 3000);
  EXPECT_TRUE(fs::is_empty(fs::path((*t)->path()) / "tmp"));
  EXPECT_EQ(fs::status(dir_ + "/v1").permissions() & fs::perms::others_all, fs::perms::none);
}

TEST_F(DiskTierTest, ACorruptTruncatedOrMissingFileFailsItsLoadAndIsRemoved) {
  auto t = DiskTier::Open(Config());
  ASSERT_TRUE(t.ok());
  std::vector<cache::TierKey> keys;
  for (int i = 0; i < 5; ++i) {
    Block b = Random(10 + i);
    keys.push_back(Key(**t, 10 * i));
    (*t)->Store(keys.back(), b.Segments());
  }
  (*t)->Flush();
  const std::string p0 = (*t)->BlockPath(keys[0]), p1 = (*t)->BlockPath(keys[1]), p2 = (*t)->BlockPath(keys[2]),
                    p3 = (*t)->BlockPath(keys[3]);
  {  // flip one payload byte
    std::fstream f(p0, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(192 + 1500);
    char c;
    f.seekg(192 + 1500);
    f.get(c);
    f.seekp(192 + 1500);
    f.put(static_cast<char>(c ^ 0x10));
  }
  ASSERT_EQ(truncate(p1.c_str(), 1000), 0);
  ASSERT_EQ(unlink(p2.c_str()), 0);
  {  // another block's file under this key's name
    fs::copy_file((*t)->BlockPath(keys[4]), p3, fs::copy_options::overwrite_existing);
  }
  Block in{std::vector<uint8_t>(1000), std::vector<uint8_t>(2000)};
  for (int i = 0; i < 4; ++i) EXPECT_FALSE((*t)->Load(keys[i], in.Segments())) << i;
  EXPECT_TRUE((*t)->Load(keys[4], in.Segments()));
  const DiskTierStats s = (*t)->stats();
  EXPECT_EQ(s.failed_corrupt, 3);
  EXPECT_EQ(s.failed_missing, 1);
  EXPECT_FALSE(fs::exists(p0));
  EXPECT_FALSE(fs::exists(p1));
  EXPECT_FALSE(fs::exists(p3));
  for (int i = 0; i < 4; ++i) EXPECT_FALSE((*t)->Contains(keys[i])) << i;
}

TEST_F(DiskTierTest, AnotherFingerprintSeesNothingAndTwoProcessesShareOneFolder) {
  auto a = DiskTier::Open(Config("model=a"));
  auto b = DiskTier::Open(Config("model=b"));
  auto a2 = DiskTier::Open(Config("model=a"));  // a second process of the same model
  ASSERT_TRUE(a.ok() && b.ok() && a2.ok());
  Block blk = Random(5);
  const cache::TierKey key = Key(**a, 7);
  EXPECT_NE(key, Key(**b, 7)) << "the fingerprint seeds every key";
  (*a)->Store(key, blk.Segments());
  (*a)->Flush();
  EXPECT_FALSE((*b)->Contains(key));
  EXPECT_NE((*a)->path(), (*b)->path());
  EXPECT_TRUE((*a2)->Contains(key)) << "found on disk by a probe";
  Block in{std::vector<uint8_t>(1000), std::vector<uint8_t>(2000)};
  EXPECT_TRUE((*a2)->Load(key, in.Segments()));
  EXPECT_EQ(in.k, blk.k);
  EXPECT_EQ((*a2)->stats().found_on_disk, 1);
}

TEST_F(DiskTierTest, StaysWithinItsCapacityEvictingTheLeastRecentlyUsed) {
  DiskTierConfig c = Config();
  c.capacity_bytes = 20 * (3000 + 192);
  auto t = DiskTier::Open(c);
  ASSERT_TRUE(t.ok());
  std::vector<cache::TierKey> keys;
  for (int i = 0; i < 60; ++i) {
    Block b = Random(100 + i);
    keys.push_back(Key(**t, i));
    (*t)->Store(keys.back(), b.Segments());
    (*t)->Flush();
    if (i >= 1) {  // keep block 0 hot
      Block in{std::vector<uint8_t>(1000), std::vector<uint8_t>(2000)};
      ASSERT_TRUE((*t)->Load(keys[0], in.Segments())) << i;
    }
  }
  const DiskTierStats s = (*t)->stats();
  EXPECT_LE(s.used_bytes, c.capacity_bytes);
  EXPECT_GT(s.evicted_blocks, 0);
  int64_t on_disk = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path((*t)->path()) / "kv"))
    if (e.is_regular_file()) on_disk += static_cast<int64_t>(e.file_size());
  EXPECT_LE(on_disk, c.capacity_bytes);
  EXPECT_TRUE((*t)->Contains(keys[0])) << "the hot block survives";
  EXPECT_FALSE((*t)->Contains(keys[1])) << "the coldest went first";
}

TEST_F(DiskTierTest, LeftoverWritesOfADeadProcessAreRemovedAtStart) {
  { auto t = DiskTier::Open(Config()); ASSERT_TRUE(t.ok()); }
  auto probe = DiskTier::Open(Config());
  ASSERT_TRUE(probe.ok());
  const std::string tmp = (*probe)->path() + "/tmp";
  probe->reset();
  // A pid that cannot be alive (above pid_max's ceiling), and a half-written block file name.
  std::ofstream(tmp + "/4194399.1") << "half a block";
  auto t = DiskTier::Open(Config());
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(fs::is_empty(tmp));
  EXPECT_EQ((*t)->stats().blocks, 0);
}

TEST_F(DiskTierTest, RefusesAFolderItCannotWrite) {
  DiskTierConfig c = Config();
  c.dir = "/proc/radixlm-no-such-folder";
  EXPECT_FALSE(DiskTier::Open(c).ok());
  c = Config();
  c.capacity_bytes = 0;
  EXPECT_FALSE(DiskTier::Open(c).ok());
}

// Files planted in the folder by someone else (issue 45's probe): a FIFO in place of a block once
// hung that request and every later one; a FIFO named like a state file hung start-up; a
// symlinked v1/ sent every block outside the folder. Each is now skipped or refused.
TEST_F(DiskTierTest, FifosSymlinksAndDevicesInTheFolderAreNeverFollowedOrWaitedOn) {
  cache::TierKey fifo_key, link_key, dev_key, state_key;
  std::string state_path;
  {
    auto t = DiskTier::Open(Config());
    ASSERT_TRUE(t.ok());
    for (int i = 0; i < 3; ++i) {
      Block b = Random(40 + i);
      (*t)->Store(Key(**t, 100 * i), b.Segments());
    }
    (*t)->Flush();
    fifo_key = Key(**t, 0);
    link_key = Key(**t, 100);
    dev_key = Key(**t, 200);
    ASSERT_EQ(unlink((*t)->BlockPath(fifo_key).c_str()), 0);
    ASSERT_EQ(mkfifo((*t)->BlockPath(fifo_key).c_str(), 0600), 0);
    ASSERT_EQ(unlink((*t)->BlockPath(link_key).c_str()), 0);
    fs::create_symlink((*t)->BlockPath(dev_key), (*t)->BlockPath(link_key));  // a link to a real block
    ASSERT_EQ(unlink((*t)->BlockPath(dev_key).c_str()), 0);
    fs::create_symlink("/dev/zero", (*t)->BlockPath(dev_key));
    // A FIFO named like a state file (the scan reads state headers).
    state_key = Key(**t, 300);
    const std::string hex = (*t)->BlockPath(state_key).substr((*t)->path().size() + 4, 2);
    fs::create_directories((*t)->path() + "/ssm/" + hex);
    state_path = (*t)->path() + "/ssm/" + hex + "/" + fs::path((*t)->BlockPath(state_key)).stem().string() + ".st";
    ASSERT_EQ(mkfifo(state_path.c_str(), 0600), 0);
  }
  auto t = DiskTier::Open(Config());  // start-up does not wait on the FIFO
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ((*t)->stats().blocks, 0);
  Block in{std::vector<uint8_t>(1000), std::vector<uint8_t>(2000)};
  for (const auto& key : {fifo_key, link_key, dev_key}) {
    EXPECT_FALSE((*t)->Contains(key));
    EXPECT_FALSE((*t)->Load(key, in.Segments()));  // missing, at once
  }
  // A block stored again under a planted name: written as a new regular file next to nothing.
  Block b = Random(40);
  (*t)->Store(fifo_key, b.Segments());
  (*t)->Flush();
  EXPECT_TRUE(fs::is_fifo((*t)->BlockPath(fifo_key)));  // never replaced behind a FIFO's reader
}

TEST_F(DiskTierTest, RefusesAVersionFolderThatIsASymlink) {
  const std::string elsewhere = dir_ + "-elsewhere";
  fs::create_directories(elsewhere);
  fs::create_symlink(elsewhere, dir_ + "/v1");
  auto t = DiskTier::Open(Config());
  EXPECT_FALSE(t.ok());
  if (!t.ok()) {
    EXPECT_NE(t.status().message().find("not a plain folder"), std::string::npos) << t.status().message();
  }
  EXPECT_TRUE(fs::is_empty(elsewhere));
  fs::remove_all(elsewhere);
}

}  // namespace
}  // namespace radixlm::tier
