#include "tier/redis_tier.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "core/temp_dir_test.h"
#include "tier/test_block_test.h"
#include "tier/block_record.h"

namespace radixlm::tier {
namespace {

namespace fs = std::filesystem;

// A redis-server of its own on a unix socket in a scratch folder (SKIPPED where Debian's
// redis-server is not installed: scripts/setup.sh installs it).
class RedisServer {
 public:
  explicit RedisServer(const std::string& dir, const std::string& extra = "") : socket_(dir + "/redis.sock"), extra_(extra) {}
  ~RedisServer() { Stop(); }
  static bool Available() { return std::system("command -v redis-server > /dev/null 2>&1") == 0; }
  void Start() {
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<std::string> args = {"redis-server", "--port", "0", "--unixsocket", socket_, "--save", "", "--appendonly",
                                       "no", "--daemonize", "no", "--loglevel", "warning"};
      if (!extra_.empty()) {
        args.push_back("--maxmemory");
        args.push_back(extra_);
        args.push_back("--maxmemory-policy");
        args.push_back("noeviction");
      }
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      freopen("/dev/null", "w", stdout);
      execvp("redis-server", argv.data());
      _exit(127);
    }
    for (int i = 0; i < 200 && !fs::exists(socket_); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    fs::remove(socket_);
  }
  std::string url() const { return "unix://" + socket_; }
  // A raw command on a connection of its own (to corrupt or inspect values behind the tier).
  redisReply* Command(const char* fmt, const std::string& a, const std::string& b = "") const {
    redisContext* c = redisConnectUnix(socket_.c_str());
    redisReply* r = static_cast<redisReply*>(b.empty() ? redisCommand(c, fmt, a.data(), a.size())
                                                       : redisCommand(c, fmt, a.data(), a.size(), b.data(), b.size()));
    redisFree(c);
    return r;
  }

 private:
  std::string socket_, extra_;
  pid_t pid_ = -1;
};

using Block = TestBlock;
Block Random(uint64_t seed) { return TestBlock::Random(seed); }

class RedisTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RedisServer::Available()) GTEST_SKIP() << "redis-server not installed (scripts/setup.sh installs it)";
  }
  RedisTierConfig Config(const RedisServer& s, const std::string& fp = "model=a") const {
    return {.url = s.url(), .fingerprint = fp, .block_tokens = 4, .block_bytes = 3000, .state_bytes = 500, .timeout_seconds = 0.5};
  }
  static cache::TierKey Key(const Tier& t, int i) {
    const std::vector<int32_t> tokens = {i, i + 1, i + 2, i + 3};
    return t.hasher().Next(nullptr, tokens, 0);
  }
  const core::TempDir tmp_{"radixlm_redis"};
};

TEST(RedisUrl, ParsesHostsSocketsAndDatabasesAndRefusesWhatItCannotServe) {
  auto a = ParseRedisUrl("redis://cache.internal:6380/2");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "cache.internal");
  EXPECT_EQ(a->port, 6380);
  EXPECT_EQ(a->db, 2);
  auto b = ParseRedisUrl("redis://replica@10.0.0.5");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->user, "replica");
  EXPECT_EQ(b->port, 6379);
  auto c = ParseRedisUrl("unix:///run/redis/redis.sock?db=3");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->unix_path, "/run/redis/redis.sock");
  EXPECT_EQ(c->db, 3);
  auto v6 = ParseRedisUrl("redis://[::1]:7000");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 7000);
  for (const char* bad : {"rediss://h:6379", "http://h", "redis://", "redis://h:99999", "redis://u:secret@h", "redis://h/x",
                          "unix://relative.sock"})
    EXPECT_FALSE(ParseRedisUrl(bad).ok()) << bad;
}

TEST_F(RedisTierTest, AReplicaSeesAnotherReplicasMarksNotItsOwnUntilClearedOrExpired) {
  RedisServer server(tmp_.path());
  server.Start();
  auto a = RedisTier::Open(Config(server));
  auto b = RedisTier::Open(Config(server));
  auto other_model = RedisTier::Open(Config(server, "model=b"));
  ASSERT_TRUE(a.ok() && b.ok() && other_model.ok());
  const std::vector<cache::TierKey> keys = {Key(**a, 1), Key(**a, 2), Key(**a, 3)};
  EXPECT_FALSE((*b)->ComputingElsewhere(keys[0]));
  (*a)->MarkComputing(keys, 30, 412.5);
  (*a)->Flush();
  for (const cache::TierKey& k : keys) {
    const std::optional<double> rate = (*b)->ComputingElsewhere(k);
    ASSERT_TRUE(rate) << "b sees a's mark";
    EXPECT_DOUBLE_EQ(*rate, 412.5);
    EXPECT_FALSE((*a)->ComputingElsewhere(k)) << "a's own mark is not another's";
    EXPECT_FALSE((*other_model)->ComputingElsewhere(k)) << "marks are per model";
  }
  // A block stored, then its marks cleared: cleared behind the store, in the writer's order.
  Block block = Random(7);
  (*a)->Store(keys[0], block.Segments());
  (*a)->ClearComputing(keys);
  (*a)->Flush();
  EXPECT_TRUE((*b)->Contains(keys[0]));
  for (const cache::TierKey& k : keys) EXPECT_FALSE((*b)->ComputingElsewhere(k));
  // A marker that dies leaves marks that expire.
  (*a)->MarkComputing(keys, 0.2, 100);
  (*a)->Flush();
  EXPECT_TRUE((*b)->ComputingElsewhere(keys[1]));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_FALSE((*b)->ComputingElsewhere(keys[1]));
  // A spoiled mark is no mark.
  const std::string busy = "radixlm:v1:";
  redisReply* r = server.Command("KEYS %b", busy + "*");
  ASSERT_NE(r, nullptr);
  freeReplyObject(r);
  (*a)->MarkComputing(keys, 30, 100);
  (*a)->Flush();
  r = server.Command("KEYS %b", busy + "*:busy:*");
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3);
  const std::string spoiled_key(r->element[0]->str, r->element[0]->len);
  freeReplyObject(r);
  freeReplyObject(server.Command("SET %b %b", spoiled_key, "garbage"));
  int seen = 0;
  for (const cache::TierKey& k : keys) seen += (*b)->ComputingElsewhere(k).has_value();
  EXPECT_EQ(seen, 2);
  // Redis down: no mark, no error.
  server.Stop();
  EXPECT_FALSE((*b)->ComputingElsewhere(keys[0]));
  (*a)->MarkComputing(keys, 30, 100);
  (*a)->Flush();
}

TEST_F(RedisTierTest, ReplicasShareBlocksThroughTheServerAndLoadThemPipelined) {
  RedisServer server(tmp_.path());
  server.Start();
  auto a = RedisTier::Open(Config(server));
  ASSERT_TRUE(a.ok()) << a.status().message();
  std::vector<Block> blocks;
  std::vector<cache::TierKey> keys;
  for (int i = 0; i < 20; ++i) {
    blocks.push_back(Random(i));
    keys.push_back(Key(**a, i * 10));
    (*a)->Store(keys.back(), blocks.back().Segments());
  }
  (*a)->Flush();
  EXPECT_EQ((*a)->stats().written_blocks, 20);

  auto b = RedisTier::Open(Config(server));  // another replica of the same model
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE((*b)->Contains(keys[3]));
  std::vector<Block> in(20);
  std::vector<std::vector<iovec>> dst;
  for (Block& x : in) dst.push_back(x.Segments());
  std::vector<char> ok(20, 0);
  (*b)->LoadMany(keys, dst, ok);
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(ok[i]) << i;
    EXPECT_EQ(in[i].bytes, blocks[i].bytes) << i;
  }
  EXPECT_EQ((*b)->stats().loaded_blocks, 20);

  auto other = RedisTier::Open(Config(server, "model=b"));  // another model: nothing
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE((*other)->Contains(Key(**other, 30)));
  Block none;
  EXPECT_FALSE((*other)->Load(keys[3], none.Segments()));
}

TEST_F(RedisTierTest, ACorruptValueFailsItsLoadIsDeletedAndCounted) {
  RedisServer server(tmp_.path());
  server.Start();
  auto t = RedisTier::Open(Config(server));
  ASSERT_TRUE(t.ok());
  (*t)->ReportDrops();
  Block block = Random(1);
  const cache::TierKey key = Key(**t, 1);
  (*t)->Store(key, block.Segments());
  (*t)->Flush();
  const std::string name = "radixlm:v1:" + (*t)->Report().fingerprint;  // first 16 hex digits of the prefix
  redisReply* keys = server.Command("KEYS %b", name + "*");
  ASSERT_EQ(keys->elements, 1u);
  const std::string redis_key(keys->element[0]->str, keys->element[0]->len);
  freeReplyObject(keys);
  redisReply* got = server.Command("GET %b", redis_key);
  std::string value(got->str, got->len);
  freeReplyObject(got);
  value[kRecordHeaderBytes + 100] ^= 0x40;  // one payload bit
  freeReplyObject(server.Command("SET %b %b", redis_key, value));
  Block in;
  EXPECT_FALSE((*t)->Load(key, in.Segments()));
  EXPECT_EQ((*t)->stats().failed_corrupt, 1);
  EXPECT_FALSE((*t)->Contains(key));  // deleted
  const std::vector<cache::TierDrops> drops = (*t)->TakeDropped();
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].medium, "remote");
  freeReplyObject(server.Command("SET %b %b", redis_key, "short"));  // a truncated value
  EXPECT_FALSE((*t)->Load(key, in.Segments()));
  EXPECT_EQ((*t)->stats().failed_corrupt, 2);
}

TEST_F(RedisTierTest, AServerThatDiesOrComesBackNeverFailsACallAndIsReconnected) {
  RedisServer server(tmp_.path());
  auto t = RedisTier::Open(Config(server));  // down at start: not an error
  ASSERT_TRUE(t.ok()) << t.status().message();
  Block block = Random(2), in;
  const cache::TierKey key = Key(**t, 2);
  EXPECT_FALSE((*t)->Contains(key));
  EXPECT_FALSE((*t)->Load(key, in.Segments()));
  (*t)->Store(key, block.Segments());
  (*t)->Flush();
  EXPECT_EQ((*t)->stats().write_errors, 1);
  server.Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // past the backoff
  (*t)->Store(key, block.Segments());
  (*t)->Flush();
  ASSERT_TRUE((*t)->Contains(key));
  ASSERT_TRUE((*t)->Load(key, in.Segments()));
  EXPECT_EQ(in.bytes, block.bytes);
  server.Stop();  // killed mid-use
  EXPECT_FALSE((*t)->Load(key, in.Segments()));
  EXPECT_FALSE((*t)->Contains(key));
  server.Start();  // back, empty (a flush)
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
  EXPECT_FALSE((*t)->Contains(key));
  (*t)->Store(key, block.Segments());
  (*t)->Flush();
  EXPECT_TRUE((*t)->Load(key, in.Segments()));
  EXPECT_GE((*t)->stats().reconnects, 2);
}

TEST_F(RedisTierTest, AFullServerRefusesWritesThatAreCountedNotFatal) {
  RedisServer server(tmp_.path(), "1200000");  // ~1.2 MB, noeviction
  server.Start();
  auto t = RedisTier::Open(Config(server));
  ASSERT_TRUE(t.ok());
  for (int i = 0; i < 600; ++i) {
    Block b = Random(100 + i);
    (*t)->Store(Key(**t, 1000 + i), b.Segments());
  }
  (*t)->Flush();
  const RedisTier::Stats s = (*t)->stats();
  EXPECT_GT(s.write_errors, 0);
  EXPECT_GT(s.written_blocks, 0);
  EXPECT_EQ(s.written_blocks + s.write_errors + s.skipped_stores, 600);
}

TEST_F(RedisTierTest, StatesAreFoundByTheirParentAndLoadedWhole) {
  RedisServer server(tmp_.path());
  server.Start();
  auto t = RedisTier::Open(Config(server));
  ASSERT_TRUE(t.ok());
  const cache::TierKey parent = Key(**t, 5), key = Key(**t, 6);
  std::vector<uint8_t> state(3500);
  for (size_t i = 0; i < state.size(); ++i) state[i] = static_cast<uint8_t>(i * 7);
  std::vector<iovec> seg = {{state.data(), 500}, {state.data() + 500, 3000}};
  (*t)->StoreState(key, parent, 3, seg);
  (*t)->Flush();
  // Members spoiled behind the tier's back are skipped, not parsed into a crash.
  redisReply* keys = server.Command("KEYS %b", std::string("radixlm:v1:*:after:*"));
  ASSERT_EQ(keys->elements, 1u);
  const std::string index(keys->element[0]->str, keys->element[0]->len);
  freeReplyObject(keys);
  for (const char* junk : {"1:zz", "x:00", "2:", ":", "3:" "zz00000000000000000000000000000000000000000000000000000000000000"})
    freeReplyObject(server.Command("SADD %b %b", index, junk));
  const std::vector<cache::TierState> after = (*t)->StatesAfter(parent);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].tail, 3);
  EXPECT_EQ(after[0].key, key);
  std::vector<uint8_t> in(3500);
  std::vector<iovec> dst = {{in.data(), 500}, {in.data() + 500, 3000}};
  ASSERT_TRUE((*t)->LoadState(key, dst));
  EXPECT_EQ(in, state);
  const std::vector<iovec> as_block = {{in.data(), 1000}, {in.data() + 1000, 2000}};
  EXPECT_FALSE((*t)->Load(key, as_block));  // a state is not a block
}

}  // namespace
}  // namespace radixlm::tier
