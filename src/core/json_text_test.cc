// ParseJsonBounded's ordered documents: the same values nlohmann's own ordered parser builds,
// in time linear in the text (issue 45: 150k keys took 30 s, 500k never finished).
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>

#include "core/json_text.h"

namespace radixlm::core {
namespace {

TEST(JsonText, OrderedParseEqualsNlohmannsIncludingDuplicateKeys) {
  const char* docs[] = {
      R"({"b": 1, "a": [1, 2.5, "x", null, true, {"z": {}, "y": []}], "c": {"k": "v"}})",
      R"({"k": 1, "j": 2, "k": 3})",  // a duplicate: the first one's place, the last one's value
      R"([{"a": 1}, [], [[]], "s", -7, 18446744073709551615, 1e308])",
      R"("just a string")", "42", "null",
  };
  for (const char* d : docs) {
    const JsonParse p = ParseJsonBounded(d, {}, /*ordered=*/true);
    ASSERT_EQ(p.error, JsonParseError::kNone) << d;
    EXPECT_EQ(p.ordered_value.dump(), nlohmann::ordered_json::parse(d).dump()) << d;
  }
  // Objects past the index threshold, with duplicates, in random order.
  std::mt19937 rng(7);
  std::string big = "{";
  for (int i = 0; i < 2000; ++i) big += (i ? "," : "") + std::string("\"k") + std::to_string(rng() % 300) + "\": " + std::to_string(i);
  big += "}";
  EXPECT_EQ(ParseJsonBounded(big, {}, true).ordered_value.dump(), nlohmann::ordered_json::parse(big).dump());
}

TEST(JsonText, ManyKeysParseInLinearTime) {
  std::string body = "{\"x\": {";
  for (int i = 0; i < 500000; ++i) body += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
  body += "}}";  // 5.9 MB
  const auto t0 = std::chrono::steady_clock::now();
  const JsonParse p = ParseJsonBounded(body, {}, /*ordered=*/true);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(p.error, JsonParseError::kNone);
  EXPECT_EQ(p.ordered_value["x"].size(), 500000u);
  EXPECT_LT(s, 5.0);
}

TEST(JsonText, InvalidAndHostileTextsAreErrors) {
  EXPECT_EQ(ParseJsonBounded("{\"a\": }", {}, true).error, JsonParseError::kInvalid);
  EXPECT_EQ(ParseJsonBounded(std::string(200, '['), {}, true).error, JsonParseError::kTooDeep);
  EXPECT_EQ(ParseJsonBounded(std::string("{\"a\":1}\0", 8), {}, true).error, JsonParseError::kInvalid);
}

}  // namespace
}  // namespace radixlm::core
