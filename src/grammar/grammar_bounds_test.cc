// What a grammar from a hostile request may cost: every case here once crashed the server or
// stalled it (issue 45's probe), and must now be refused at compile with an error naming the
// bound, or served within the work budget, quickly.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "grammar/grammar.h"
#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace radixlm::grammar {
namespace {

std::shared_ptr<const Vocabulary> ByteVocab() {
  static auto v = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
    t.push_back("</s>");
    const std::vector<int32_t> stop = {256};
    return std::make_shared<const Vocabulary>(std::move(t), std::span<const int32_t>{}, stop);
  }();
  return v;
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The server's path: built, parsed, lowered, first mask costed.
GrammarCache::Result Compile(const std::string& gbnf) { return GrammarCache::Compile(gbnf, ByteVocab()); }

std::string Message(const GrammarCache::Result& r) { return r.ok() ? "" : r.status().message(); }

TEST(GrammarBounds, DeepNestingIsRefusedNotAStackOverflow) {
  for (int depth : {100000, 30000, 129}) {
    const std::string g = "root ::= " + std::string(depth, '(') + "\"a\"" + std::string(depth, ')');
    const auto r = Compile(g);
    ASSERT_FALSE(r.ok()) << depth;
    EXPECT_NE(Message(r).find("nest more than 128 deep"), std::string::npos) << Message(r);
  }
  EXPECT_TRUE(Compile("root ::= " + std::string(128, '(') + "\"a\"" + std::string(128, ')')).ok());
}

TEST(GrammarBounds, LongRuleChainsCompileInLinearTime) {
  // A chain of rules, each referring to the next (in tail position, and not: then every level
  // is a live stack at the start): the nullable and shortest-derivation passes, lowering and
  // the closure are all iterative.
  for (auto [form, n] : {std::pair<const char*, int>{"r%d ::= r%d\n", 50000}, {"r%d ::= r%d \"x\" | \"y\"\n", 5000}}) {
    std::string g = "root ::= r0\n";
    char line[64];
    for (int i = 0; i < n; ++i) {
      std::snprintf(line, sizeof line, form, i, i + 1);
      g += line;
    }
    g += "r" + std::to_string(n) + " ::= \"a\"\n";
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = Compile(g);
    ASSERT_TRUE(r.ok()) << Message(r);
    Matcher m(*r);
    EXPECT_TRUE(m.AcceptBytes("a"));
    EXPECT_LT(Seconds(t0), 5.0);
  }
}

TEST(GrammarBounds, TooManyRulesOrSymbolsAreRefused) {
  std::string g = "root ::= r0\n";
  for (int i = 0; i < 100001; ++i) g += "r" + std::to_string(i) + " ::= \"a\"\n";
  EXPECT_NE(Message(Compile(g)).find("more than 100000 rules"), std::string::npos);
  // Repetitions multiply symbols: refused before they are expanded.
  std::string rep = "root ::= (\"abcdefghij\"{2000}) (\"abcdefghij\"{2000})";
  for (int i = 0; i < 60; ++i) rep += " (\"abcdefghij\"{2000})";
  EXPECT_NE(Message(Compile(rep)).find("symbols"), std::string::npos) << Message(Compile(rep));
  EXPECT_NE(Message(Compile("root ::= \"" + std::string(3 << 20, 'a') + "\"")).find("over the limit"), std::string::npos);
}

TEST(GrammarBounds, ManyAlternativesAreRefusedByTheFirstMasksBudget) {
  // 30,000 alternatives live at once: once seconds of mask per token; now over the budget at
  // compile, refused in well under a second.
  std::string g = "root ::= \"w0\"";
  for (int i = 1; i < 30000; ++i) g += " | \"w" + std::to_string(i) + "\"";
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = GrammarCache::Compile(g, ByteVocab(), /*fuel=*/200000);
  EXPECT_NE(Message(r).find("budget"), std::string::npos) << Message(r);
  EXPECT_LT(Seconds(t0), 2.0);
  // The same grammar within a larger budget is served: the mask is linear in the stacks.
  const auto ok = GrammarCache::Compile(g, ByteVocab(), /*fuel=*/kStepFuel);
  ASSERT_TRUE(ok.ok()) << Message(ok);
  Matcher m(*ok);
  EXPECT_TRUE(m.AcceptBytes("w2999") && m.IsCompleted());
}

TEST(GrammarBounds, AStepOverItsBudgetEndsTheMatcherNotTheProcess) {
  // Every "a" doubles the distinct stacks (which closing letter each level waits for).
  auto g = Compile("root ::= x\nx ::= \"a\" x \"b\" | \"a\" x \"c\" |");
  ASSERT_TRUE(g.ok());
  Matcher m(*g);
  m.set_fuel(20000);
  bool stopped = false;
  for (int i = 0; i < 200 && !stopped; ++i) stopped = !m.AcceptBytes("a");
  EXPECT_TRUE(stopped);
  EXPECT_TRUE(m.over_budget());
  std::vector<uint32_t> mask(9, 0xFFFFFFFFu);
  EXPECT_FALSE(m.FillNextTokenMask(mask));
  for (uint32_t w : mask) EXPECT_EQ(w, 0u);
}

TEST(GrammarBounds, EmptyLanguagesAreRefusedAtCompile) {
  EXPECT_NE(Message(Compile("root ::= [^\\x00-\\U0010FFFF]")).find("language is empty"), std::string::npos);
  EXPECT_NE(Message(Compile("root ::= \"x\" root")).find("language is empty"), std::string::npos);
  // A dead alternative is dropped: no sample can walk into it and get stuck.
  auto g = Compile("root ::= \"a\" dead | \"b\"\ndead ::= [^\\x00-\\U0010FFFF]");
  ASSERT_TRUE(g.ok());
  Matcher m(*g);
  EXPECT_FALSE(m.AcceptBytes("a"));
  EXPECT_TRUE(m.AcceptBytes("b"));
}

TEST(GrammarBounds, SchemaEnumsOfManyStringsAreATrie) {
  std::string schema = "{\"enum\": [";
  for (int i = 0; i < 30000; ++i) schema += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  schema += ", 7, null]}";
  const auto t0 = std::chrono::steady_clock::now();
  auto g = CompiledGrammar::FromJsonSchema(schema, ByteVocab());
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_TRUE((*g)->CheckCost().ok());
  EXPECT_LT(Seconds(t0), 3.0);
  for (const char* text : {"\"s0\"", "\"s29999\"", "\"s1234\"", "7", "null"}) {
    Matcher m(*g);
    EXPECT_TRUE(m.AcceptBytes(text) && m.IsCompleted()) << text;
  }
  for (const char* text : {"\"s\"", "\"s30000\"", "\"s01\"", "8", "\"7\""}) {
    Matcher m(*g);
    EXPECT_FALSE(m.AcceptBytes(text) && m.IsCompleted()) << text;
  }
}

TEST(GrammarBounds, SchemaCountsBeyondEveryIntegerTypeNeverWrap) {
  auto r = JsonSchemaToGbnf(R"({"type": "array", "minItems": 18446744073709551616})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'minItems': above 2000"), std::string::npos) << r.status().message();
  r = JsonSchemaToGbnf(R"({"type": "array", "minItems": 1e9})");
  EXPECT_NE(r.status().message().find("'minItems'"), std::string::npos) << r.status().message();
  r = JsonSchemaToGbnf(R"({"type": "string", "minLength": 1e30})");
  EXPECT_NE(r.status().message().find("'minLength'"), std::string::npos) << r.status().message();
}

TEST(GrammarBounds, HugeSchemasStopAtTheGrammarSizeLimit) {
  const std::string name(1 << 20, 'a');
  const auto t0 = std::chrono::steady_clock::now();
  auto r = JsonSchemaToGbnf(R"({"type": "object", "properties": {")" + name + R"(": {"type": "string"}}, "required": [")" +
                            name + "\"]}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("would exceed"), std::string::npos) << r.status().message();
  EXPECT_LT(Seconds(t0), 5.0);
  // allOf over unions multiplies out: stopped at the merge budget.
  std::string all = R"({"allOf": [)";
  for (int i = 0; i < 20; ++i)
    all += std::string(i ? "," : "") + R"({"anyOf": [{"required": ["a)" + std::to_string(i) + R"("]}, {"required": ["b)" +
           std::to_string(i) + R"("]}]})";
  all += "]}";
  r = JsonSchemaToGbnf(all);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too costly"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace radixlm::grammar
