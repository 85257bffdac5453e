// Masks over the real Qwen3 vocabulary (151,936 tokens; bundled tokenizer data): random
// documents under a nested schema and free JSON, every mask checked against AcceptToken on a
// sample of tokens (all allowed ones plus random others), every document a JSON text.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>

#include <nlohmann/json.hpp>

#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::grammar {
namespace {

std::shared_ptr<const Vocabulary> Qwen3() {
  static std::shared_ptr<const Vocabulary> v = []() -> std::shared_ptr<const Vocabulary> {
    const char* src = std::getenv("RADIXLM_SOURCE_DIR");
    auto tok = tokenizer::Tokenizer::Named("qwen3", std::string(src ? src : ".") + "/third_party_data/npm/node_modules");
    if (!tok.ok()) return nullptr;
    std::vector<std::string> bytes;
    std::vector<int32_t> special, stop = {(*tok)->TokenId("<|im_end|>"), (*tok)->TokenId("<|endoftext|>")};
    for (int32_t i = 0; i < (*tok)->vocab_size(); ++i) {
      bytes.push_back((*tok)->TokenBytes(i));
      if ((*tok)->IsSpecial(i)) special.push_back(i);
    }
    return std::make_shared<const Vocabulary>(std::move(bytes), special, stop);
  }();
  return v;
}

const char* kNestedSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 40},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "format": "email"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
    "address": {"type": "object", "properties": {
        "street": {"type": "string"}, "city": {"type": "string"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
      "required": ["city"], "additionalProperties": false},
    "scores": {"type": "array", "items": {"type": "number"}},
    "role": {"enum": ["admin", "user", "guest"]}
  },
  "required": ["name", "age", "address"],
  "additionalProperties": false
})";

std::vector<int32_t> Bits(const std::vector<uint32_t>& mask) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < mask.size(); ++i) {
    for (uint32_t b = mask[i]; b; b &= b - 1) out.push_back(static_cast<int32_t>(i * 32 + __builtin_ctz(b)));
  }
  return out;
}

void Walk(const std::shared_ptr<const CompiledGrammar>& g, uint64_t seed, int max_tokens, bool check) {
  const Vocabulary& v = g->vocab();
  std::mt19937_64 rng(seed);
  Matcher m(g);
  std::vector<uint32_t> mask((v.size() + 31) / 32);
  std::string text;
  std::vector<double> us;
  for (int step = 0; step < max_tokens && !m.IsTerminated(); ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    m.FillNextTokenMask(mask);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    const std::vector<int32_t> allowed = Bits(mask);
    ASSERT_FALSE(allowed.empty()) << "dead end after: " << text;
    if (check && step % 8 == 0) {  // the mask against AcceptToken on a sample
      std::vector<int32_t> sample = allowed;
      for (int k = 0; k < 2000; ++k) sample.push_back(static_cast<int32_t>(rng() % v.size()));
      for (int32_t id : sample) {
        Matcher f = m.Fork();
        const bool in_mask = (mask[id >> 5] >> (id & 31)) & 1;
        ASSERT_EQ(f.AcceptToken(id), in_mask) << "token " << id << " '" << v.bytes(id) << "' after: " << text;
      }
    }
    int32_t pick = allowed[rng() % allowed.size()];
    if (m.IsCompleted() && rng() % 2) pick = v.stop_ids().front();
    ASSERT_TRUE(m.AcceptToken(pick));
    if (!v.IsStop(pick)) text += v.bytes(pick);
  }
  std::sort(us.begin(), us.end());
  std::printf("  %zu masks: median %.1f us, p99 %.1f us, max %.1f us; %s\n", us.size(), us[us.size() / 2],
              us[std::min(us.size() - 1, us.size() * 99 / 100)], us.back(), m.IsCompleted() ? "complete" : "cut");
  if (m.IsCompleted()) {
    EXPECT_FALSE(nlohmann::json::parse(text, nullptr, false).is_discarded()) << text;
  } else {
    const std::string done = text + m.ShortestCompletion();
    EXPECT_FALSE(nlohmann::json::parse(done, nullptr, false).is_discarded()) << done;
  }
}

TEST(Qwen3MaskTest, NestedSchemaAndFreeJson) {
  auto vocab = Qwen3();
  if (!vocab) GTEST_SKIP() << "no bundled qwen3 tokenizer data";
  auto nested = CompiledGrammar::FromJsonSchema(kNestedSchema, vocab);
  ASSERT_TRUE(nested.ok()) << nested.status().message();
  auto free_json = CompiledGrammar::JsonObject(vocab);
  for (uint64_t seed : {1, 2, 3}) {
    Walk(*nested, seed, 200, /*check=*/seed == 1);
    Walk(free_json, seed, 200, /*check=*/seed == 1);
  }
}

}  // namespace
}  // namespace radixlm::grammar
