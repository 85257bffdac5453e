#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "replay/workload.h"

namespace radixlm::replay {
namespace {

namespace fs = std::filesystem;

class WorkloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("replay_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "chat");
    fs::create_directories(dir_ / "agents/swe_agent");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) { std::ofstream(dir_ / rel) << text; }
  fs::path dir_;
};

TEST_F(WorkloadTest, MtBenchTurnsAreCappedAndAnswersGoIntoTheHistory) {
  Write("chat/mt_bench_questions.jsonl", "{\"question_id\": 7, \"turns\": [\"a\", \"b\", \"c\"]}\n\n{\"turns\": [\"d\"]}\n");
  auto convs = LoadWorkload("mtbench", dir_.string(), 10, 2);
  ASSERT_TRUE(convs.ok()) << convs.status().ToString();
  ASSERT_EQ(convs->size(), 2u);
  EXPECT_EQ((*convs)[0].name, "mtbench-7");
  EXPECT_EQ((*convs)[1].name, "mtbench-3");  // no id: the line number
  ASSERT_EQ((*convs)[0].turns.size(), 2u);
  EXPECT_EQ((*convs)[0].turns[1].history[0].content, "b");
  EXPECT_TRUE((*convs)[0].model_answers_in_history);
  AddSystemPrompt(*convs, "sys");
  EXPECT_EQ((*convs)[0].turns[0].history[0].role, "system");
  EXPECT_EQ((*convs)[0].turns[1].history[0].content, "b");  // later turns extend the first
}

TEST_F(WorkloadTest, SweAgentTurnsAreTheAssistantMessagesWithTheirHistory) {
  Write("agents/swe_agent/t.traj",
        R"({"history": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "u"}]},
                        {"role": "assistant", "content": "a1"}, {"role": "observation", "content": "o"},
                        {"role": "assistant", "content": "a2"}]})");
  auto convs = LoadWorkload("swe-agent", dir_.string(), 10, 10);
  ASSERT_TRUE(convs.ok()) << convs.status().ToString();
  ASSERT_EQ(convs->size(), 1u);
  const Conversation& c = (*convs)[0];
  EXPECT_EQ(c.name, "t");
  ASSERT_EQ(c.turns.size(), 2u);
  EXPECT_EQ(c.turns[0].history.size(), 2u);
  EXPECT_EQ(c.turns[0].history[1].content, "u");
  EXPECT_EQ(c.turns[0].recorded, "a1");
  EXPECT_EQ(c.turns[1].history.back().role, "tool");
  EXPECT_EQ(c.turns[1].recorded, "a2");
  AddSystemPrompt(*convs, "other");  // has its own system message
  EXPECT_EQ((*convs)[0].turns[1].history[0].content, "s");
}

TEST_F(WorkloadTest, BadInputIsAnErrorNamingIt) {
  Write("chat/mt_bench_questions.jsonl", "{\"turns\": [1]}\n");
  auto bad_line = LoadWorkload("mtbench", dir_.string(), 10, 10);
  ASSERT_FALSE(bad_line.ok());
  EXPECT_NE(bad_line.status().message().find("mt_bench_questions.jsonl:1"), std::string::npos);
  Write("agents/swe_agent/x.traj", "[1, 2]");
  EXPECT_FALSE(LoadWorkload("swe-agent", dir_.string(), 10, 10).ok());
  auto missing = LoadWorkload("swe-agent", (dir_ / "none").string(), 10, 10);
  ASSERT_FALSE(missing.ok());
  auto unknown = LoadWorkload("sharegpt", dir_.string(), 10, 10);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("mtbench, swe-agent"), std::string::npos);
}

}  // namespace
}  // namespace radixlm::replay
