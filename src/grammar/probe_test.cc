#include <gtest/gtest.h>

#include "grammar/probe.h"

namespace radixlm::grammar {
namespace {

using nlohmann::json;

std::shared_ptr<const CompiledGrammar> Digits() {
  std::vector<std::string> bytes = {"0", "1", "12", "a", "</s>"};
  const std::vector<int32_t> stop = {4};
  auto vocab = std::make_shared<const Vocabulary>(std::move(bytes), std::span<const int32_t>{}, stop);
  auto g = CompiledGrammar::FromGbnf("root ::= [0-9]+", vocab);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return *g;
}

TEST(GrammarProbe, RandomDocumentsAreWholeDocumentsOfTheGrammar) {
  const auto g = Digits();
  std::mt19937_64 rng(5);
  for (int i = 0; i < 20; ++i) {
    auto doc = SampleDocument(g, rng, {.max_tokens = 3});
    ASSERT_TRUE(doc.ok());
    const std::string text = (*doc)["document"];
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text.find_first_not_of("0123456789"), std::string::npos) << text;
    EXPECT_LE((*doc)["tokens"].get<int>(), 3);
    EXPECT_EQ(CheckText(g, text), (json{{"prefix", true}, {"complete", true}}));
  }
  EXPECT_EQ(CheckText(g, "1a"), (json{{"prefix", false}, {"complete", false}}));
  EXPECT_EQ(CheckText(g, ""), (json{{"prefix", true}, {"complete", false}}));
}

TEST(GrammarProbe, BenchCountsTheWalksAndAnExhaustedBudgetIsAnError) {
  const auto g = Digits();
  std::mt19937_64 rng(1);
  auto stats = BenchMasks(g, rng, 4, {.max_tokens = 5, .stop_bias = 1.0});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)["runs"], 4);
  EXPECT_EQ((*stats)["documents_completed"], 4);  // a stop is taken as soon as one is allowed
  EXPECT_EQ((*stats)["tokens"], 4);
  auto starved = BenchMasks(g, rng, 1, {.fuel = 0});
  ASSERT_FALSE(starved.ok());
  EXPECT_EQ(starved.status().code(), core::StatusCode::kResourceExhausted);
}

TEST(GrammarProbe, CheckCaseAcceptsInstancesInBothStyles) {
  auto out = CheckCase(nlohmann::ordered_json::parse(
      R"({"schema": {"type": "object", "properties": {"x": {"type": "integer", "minimum": 3}}, "required": ["x"]},
          "instances": [{"x": 4}, {"x": 2}, {"y": 4, "x": 5}]})"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)["compiled"], true);
  EXPECT_EQ((*out)["accept"], (json{{true, true}, {false, false}, {true, true}}));
  auto refused = CheckCase(nlohmann::ordered_json::parse(R"({"schema": {"type": "nonsense"}})"));
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ((*refused)["compiled"], false);
  EXPECT_TRUE((*refused)["error"].is_string());
  EXPECT_FALSE(CheckCase(json::array()).ok());
}

}  // namespace
}  // namespace radixlm::grammar
