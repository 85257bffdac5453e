// batch::Job (src/batch/job.h) on a real engine (random:tiny): the answers of a planned job equal
// those of the same lines submitted all at once in file order (the serve schedule), of two ranks'
// shares put together, and of a job resumed with some lines done; refused lines are answered
// by rank 0 alone. Bitwise: the output lines are compared as text.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "batch/job.h"
#include "core/json_text.h"
#include "core/random.h"
#include "models/loader.h"
#include "runner/model_executor.h"

namespace radixlm {
namespace {

using nlohmann::json;

// A job of completions in shared-prefix groups (token ids), a chat line, n and best_of, and
// lines refused without the model.
std::string JobText(uint64_t seed) {
  core::Rng rng(seed);
  std::string text;
  auto add = [&](const json& line) { text += line.dump() + "\n"; };
  for (int g = 0; g < 4; ++g) {
    json prefix = json::array();
    for (uint64_t k = 0, n = 40 + rng.Below(80); k < n; ++k) prefix.push_back(100 + rng.Below(5000));
    for (int m = 0; m < 3; ++m) {
      json prompt = prefix;
      for (uint64_t k = 0, n = 2 + rng.Below(10); k < n; ++k) prompt.push_back(100 + rng.Below(5000));
      add({{"custom_id", "g" + std::to_string(g) + "-" + std::to_string(m)}, {"method", "POST"}, {"url", "/v1/completions"},
           {"body", {{"prompt", prompt}, {"max_tokens", 3 + rng.Below(6)}, {"temperature", 0}}}});
    }
  }
  add({{"custom_id", "chat"}, {"method", "POST"}, {"url", "/v1/chat/completions"},
       {"body", {{"messages", {{{"role", "user"}, {"content", "Hello there"}}}}, {"max_tokens", 4}, {"n", 2}, {"temperature", 0}}}});
  add({{"custom_id", "best"}, {"method", "POST"}, {"url", "/v1/completions"},
       {"body", {{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0.7}, {"seed", 9}, {"best_of", 3}}}});
  add({{"custom_id", "bad-params"}, {"method", "POST"}, {"url", "/v1/completions"}, {"body", {{"prompt", "x"}, {"max_tokens", 0}}}});
  add({{"custom_id", "streamed"}, {"method", "POST"}, {"url", "/v1/completions"}, {"body", {{"prompt", "x"}, {"stream", true}}}});
  text += "not JSON\n";
  return text;
}

class BatchJob : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = models::LoadModel("random:tiny").value().release();
    const char* src = std::getenv("RADIXLM_SOURCE_DIR");
    tok_ = tokenizer::Tokenizer::Named("qwen3", std::string(src ? src : ".") + "/third_party_data/npm/node_modules").value().release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tok_;
  }

  // The answers (line index -> output line text) of rank `rank` of `ranks` on a fresh engine.
  static std::map<int64_t, std::string> Answers(const batch::JobInput& in, const std::map<int64_t, std::string>& done,
                                                const std::string& schedule, int rank, int ranks, batch::RunFigures* figures = nullptr) {
    core::ThreadPool pool(2);
    models::KvStore kv(model_->config(), {512, 16});
    runner::ModelExecutor exec(*model_, pool, kv);
    engine::Engine eng({.num_blocks = 512, .block_tokens = 16}, exec);
    batch::JobRuntime rt{.tok = tok_, .engine = &eng, .stop_ids = {tok_->eos_id()}};
    rt.chat_format = tokenizer::ChatTemplate::Named("chatml").value();
    batch::Job job(in, done, std::move(rt), {.model_name = "m", .created = 1, .schedule = schedule});
    std::map<int64_t, std::string> out;
    const batch::RunFigures f = job.Run(rank, ranks, [&](int64_t i, const json& line) {
      EXPECT_TRUE(out.emplace(i, core::JsonText(line)).second) << "line " << i << " answered twice";
    });
    if (figures) *figures = f;
    return out;
  }

  static models::Transformer* model_;
  static tokenizer::Tokenizer* tok_;
};
models::Transformer* BatchJob::model_ = nullptr;
tokenizer::Tokenizer* BatchJob::tok_ = nullptr;

TEST_F(BatchJob, PlannedServedShardedAndResumedJobsAnswerAlike) {
  const auto in = batch::ReadJobInput(JobText(3), "job.jsonl").value();
  ASSERT_EQ(in.size(), 17);
  EXPECT_EQ(in.invalid(), 1);
  batch::RunFigures planned_figures;
  const auto planned = Answers(in, {}, "plan", 0, 1, &planned_figures);
  ASSERT_EQ(static_cast<int64_t>(planned.size()), in.size());
  EXPECT_EQ(planned_figures.answered, in.size());
  EXPECT_LT(planned_figures.computed_prompt_tokens, planned_figures.prompt_tokens);  // prefixes computed once
  EXPECT_EQ(Answers(in, {}, "serve", 0, 1), planned);
  // Two ranks: disjoint shares that make the whole; only rank 0 answers the refused lines.
  auto r0 = Answers(in, {}, "plan", 0, 2), r1 = Answers(in, {}, "plan", 1, 2);
  EXPECT_FALSE(r1.empty());
  for (const auto& [i, line] : r1) {
    EXPECT_FALSE(r0.count(i)) << i;
    EXPECT_EQ(json::parse(line)["response"]["status_code"], 200) << line;
  }
  r0.insert(r1.begin(), r1.end());
  EXPECT_EQ(r0, planned);
  // Resumed with every third line done: the rest, and only the rest, answered alike.
  std::map<int64_t, std::string> done;
  for (const auto& [i, line] : planned)
    if (i % 3 == 0) done[i] = line;
  const auto rest = Answers(in, done, "plan", 0, 1);
  EXPECT_EQ(rest.size(), planned.size() - done.size());
  for (const auto& [i, line] : rest) EXPECT_EQ(line, planned.at(i)) << i;
}

TEST_F(BatchJob, RefusedLinesSayWhy) {
  const auto in = batch::ReadJobInput(JobText(4), "job.jsonl").value();
  const auto answers = Answers(in, {}, "plan", 0, 1);
  auto status_of = [&](const std::string& id) {
    for (int64_t i = 0; i < in.size(); ++i)
      if (in.custom_id(i) == id) return json::parse(answers.at(i))["response"]["status_code"].get<int>();
    return -1;
  };
  EXPECT_EQ(status_of("bad-params"), 400);
  EXPECT_EQ(status_of("streamed"), 400);
  EXPECT_EQ(status_of("chat"), 200);
  EXPECT_EQ(json::parse(answers.at(in.size() - 1))["error"]["code"], "invalid_json");
}

TEST_F(BatchJob, ADuplicatedCustomIdNamesBothLines) {
  const std::string line = R"({"custom_id":"x","method":"POST","url":"/v1/completions","body":{"prompt":"a"}})";
  const auto in = batch::ReadJobInput(line + "\n\n" + line + "\n", "job.jsonl");
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().message(), "job.jsonl: custom_id 'x' appears on lines 1 and 3; each request needs its own");
}

}  // namespace
}  // namespace radixlm
