// GBNF parsing and the matcher on small hand-made vocabularies.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "grammar/grammar.h"
#include "grammar/grammar_cache.h"
#include "grammar/matcher.h"

namespace radixlm::grammar {
namespace {

std::shared_ptr<const Vocabulary> MakeVocab(std::vector<std::string> tokens, std::vector<int32_t> special = {},
                                            std::vector<int32_t> stop = {}) {
  return std::make_shared<const Vocabulary>(std::move(tokens), special, stop);
}

// A vocabulary of the 256 single bytes, then the given tokens; the last id is the stop token.
std::shared_ptr<const Vocabulary> ByteVocab(std::vector<std::string> extra = {}) {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
  for (auto& e : extra) t.push_back(e);
  t.push_back("</s>");
  const int32_t stop = static_cast<int32_t>(t.size()) - 1;
  return MakeVocab(std::move(t), {}, {stop});
}

bool Accepts(const std::string& gbnf, const std::string& text) {
  auto g = CompiledGrammar::FromGbnf(gbnf, ByteVocab());
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return false;
  Matcher m(*g);
  return m.AcceptBytes(text) && m.IsCompleted();
}

std::vector<int32_t> Allowed(Matcher& m) {
  const int32_t v = m.grammar().vocab().size();
  std::vector<uint32_t> mask((v + 31) / 32);
  m.FillNextTokenMask(mask);
  std::vector<int32_t> out;
  for (int32_t i = 0; i < v; ++i) {
    if ((mask[i >> 5] >> (i & 31)) & 1) out.push_back(i);
  }
  return out;
}

TEST(GbnfTest, ParsesLlamaCppSyntax) {
  const std::string g = R"(
    # a comment
    root ::= greeting " " name ("!" | "?")? [0-9]{2,3} tail
    greeting ::= "hi" | "hello"   # trailing comment
    name ::= [A-Z] [a-z]*
    tail ::= ( "x"
              | "y" )+ [^abc] . "\x41\u00e9\t\\\"\[\]\-"
  )";
  auto parsed = ParseGbnf(g);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_TRUE(Accepts(g, "hello Bob!12xyxdZA\xC3\xA9\t\\\"[]-"));
  EXPECT_TRUE(Accepts(g, "hi Al123y\xE2\x82\xAC\xF0\x9F\x98\x80" "A\xC3\xA9\t\\\"[]-"));
  EXPECT_FALSE(Accepts(g, "hi Al1y" "dZA\xC3\xA9\t\\\"[]-"));      // one digit only
  EXPECT_FALSE(Accepts(g, "hi Al1234yxZA\xC3\xA9\t\\\"[]-"));     // four digits
  EXPECT_FALSE(Accepts(g, "hi Al12yaZA\xC3\xA9\t\\\"[]-"));       // [^abc] refuses a
  // Printing and re-parsing gives a grammar accepting the same texts.
  const std::string printed = parsed->ToGbnf();
  EXPECT_TRUE(Accepts(printed, "hello Bob!12xyxdZA\xC3\xA9\t\\\"[]-")) << printed;
  EXPECT_FALSE(Accepts(printed, "hi Al1234yxZA\xC3\xA9\t\\\"[]-"));
}

TEST(GbnfTest, RepetitionBounds) {
  EXPECT_TRUE(Accepts("root ::= \"a\"{3}", "aaa"));
  EXPECT_FALSE(Accepts("root ::= \"a\"{3}", "aa"));
  EXPECT_TRUE(Accepts("root ::= \"a\"{2,}", "aaaaaaa"));
  EXPECT_FALSE(Accepts("root ::= \"a\"{2,}", "a"));
  EXPECT_TRUE(Accepts("root ::= \"a\"{0,2} \"b\"", "b"));
  EXPECT_FALSE(Accepts("root ::= \"a\"{0,2} \"b\"", "aaab"));
  EXPECT_TRUE(Accepts("root ::= \"a\"{1,5000}", std::string(3000, 'a')));  // max > 2000: unbounded (llama.cpp)
  EXPECT_FALSE(ParseGbnf("root ::= \"a\"{2001}").ok());
  EXPECT_TRUE(ParseGbnf("root ::= (\"a\"{100}){20}").ok());   // fixed counts make no rules
  EXPECT_FALSE(ParseGbnf("root ::= (\"a\"{0,100}){0,100}").ok());  // 101 rules x 100 > 2000
}

TEST(GbnfTest, ErrorsNamePosition) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"root ::= foo", "Undefined rule identifier 'foo'"},
      {"start ::= \"a\"", "grammar does not contain a 'root' symbol"},
      {"root ::= (\"a\"", "expecting ')' at line 1, column 14"},
      {"root ::= \"a\\q\"", "unknown escape at line 1, column 12"},
      {"root ::= \"\\x4\"", "expecting 2 hex chars at"},
      {"root ::= * \"a\"", "expecting preceding item to */+/?/{ at"},
      {"root ::= \"a\" ::=", "expecting newline or end at"},
      {"root \"a\"", "expecting ::= at"},
      {"root ::= \"a\"{x}", "expecting an int at"},
      {"root ::= \"a\"{1", "expecting ',' at"},
      {"root ::= [a-", "unexpected end of input"},
      {"root ::= \"abc", "unexpected end of input"},
      {"root ::= root \"a\" | \"b\"", "left recursion detected for nonterminal 'root'"},
      {"root ::= x \"a\"\nx ::= y\ny ::= \"\" | root", "left recursion"},
      {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
  };
  for (const Case& c : cases) {
    auto g = ParseGbnf(c.text);
    ASSERT_FALSE(g.ok()) << c.text;
    EXPECT_NE(g.status().message().find(c.message), std::string::npos) << c.text << " -> " << g.status().message();
  }
}

TEST(MatcherTest, MaskMatchesBruteForceOnSmallVocabulary) {
  // Tokens of several lengths, some splitting a UTF-8 character (\xC3 | \xA9 is "é").
  const std::vector<std::string> tokens = {"{", "}", "\"", "a", "ab", "abc", "\"a", "a\"", "\"}", "é",
                                           "\xC3", "\xA9", "\xA9\"", ":", " ", "1", "12", "123", "\"ab\"", "x"};
  auto vocab = MakeVocab(tokens, {}, {});
  const std::string gbnf = "root ::= \"{\" \"\\\"\" [a-cé]* \"\\\"\" \"}\" | [0-9]+\n";
  auto g = CompiledGrammar::FromGbnf(gbnf, vocab);
  ASSERT_TRUE(g.ok()) << g.status().message();
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    Matcher m(*g);
    for (int step = 0; step < 12 && !m.IsTerminated(); ++step) {
      const std::vector<int32_t> allowed = Allowed(m);
      // Brute force: every token fed on a fork.
      std::vector<int32_t> brute;
      for (int32_t id = 0; id < vocab->size(); ++id) {
        Matcher f = m.Fork();
        if (f.AcceptToken(id)) brute.push_back(id);
      }
      ASSERT_EQ(allowed, brute) << "trial " << trial << " step " << step;
      if (allowed.empty()) break;
      ASSERT_TRUE(m.AcceptToken(allowed[rng() % allowed.size()]));
    }
  }
}

TEST(MatcherTest, SplitUtf8RollbackForkAndStop) {
  auto vocab = MakeVocab({"\xC3", "\xA9", "\xC3\xA9", "a", "<eos>"}, {}, {4});
  auto g = CompiledGrammar::FromGbnf("root ::= \"a\" [é]+", vocab);
  ASSERT_TRUE(g.ok());
  Matcher m(*g);
  EXPECT_FALSE(m.IsCompleted());
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{3}));
  EXPECT_FALSE(m.AcceptToken(4));  // stop is refused before the grammar is complete
  ASSERT_TRUE(m.AcceptToken(3));
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{0, 2}));
  ASSERT_TRUE(m.AcceptToken(0));  // half of é
  EXPECT_FALSE(m.IsCompleted());
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{1}));
  ASSERT_TRUE(m.AcceptToken(1));
  EXPECT_TRUE(m.IsCompleted());
  EXPECT_FALSE(m.IsTerminated());  // more é may follow
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{0, 2, 4}));
  Matcher fork = m.Fork();
  ASSERT_TRUE(fork.AcceptToken(4));
  EXPECT_TRUE(fork.IsTerminated());
  EXPECT_FALSE(fork.AcceptToken(2));
  EXPECT_FALSE(m.IsTerminated());  // the original is unaffected
  m.Rollback(2);                   // back to after "a"
  EXPECT_EQ(m.steps(), 1);
  EXPECT_FALSE(m.IsCompleted());
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{0, 2}));
  EXPECT_FALSE(m.AcceptToken(1));  // a lone continuation byte
  ASSERT_TRUE(m.AcceptToken(2));
  EXPECT_TRUE(m.IsCompleted());
}

TEST(MatcherTest, ShortestCompletion) {
  auto vocab = ByteVocab();
  auto g = CompiledGrammar::FromGbnf("root ::= \"[\" item (\",\" item)* \"]\"\nitem ::= [a-z]+ | \"null\"", vocab);
  ASSERT_TRUE(g.ok());
  Matcher m(*g);
  ASSERT_TRUE(m.AcceptBytes("[ab,"));
  EXPECT_EQ(m.ShortestCompletion(), "a]");
  ASSERT_TRUE(m.AcceptBytes("a]"));
  EXPECT_EQ(m.ShortestCompletion(), "");
  // Too long to write: the empty string.
  auto deep = CompiledGrammar::FromGbnf("root ::= \"[\" item \"]\"\nitem ::= [a-z]{2000}", vocab);
  ASSERT_TRUE(deep.ok());
  Matcher d(*deep);
  EXPECT_EQ(d.ShortestCompletion(/*max_bytes=*/100), "");
  EXPECT_EQ(d.ShortestCompletion().size(), 2002u);
}

TEST(MatcherTest, TerminatedWhenNothingCanFollow) {
  auto vocab = MakeVocab({"ab", "a", "b", "<eos>"}, {}, {3});
  auto g = CompiledGrammar::FromGbnf("root ::= \"ab\"", vocab);
  ASSERT_TRUE(g.ok());
  Matcher m(*g);
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{0, 1}));
  ASSERT_TRUE(m.AcceptToken(0));
  EXPECT_TRUE(m.IsCompleted());
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{3}));  // only the stop token
}

TEST(MatcherTest, SpecialTokensOnlyInsideLiteralsThatSpellThem) {
  // 0..3 text, 4 <tool_call> (special), 5 <|im_end|> (special), 6 eos.
  auto vocab = MakeVocab({"<", "tool_call>", "x", "\"", "<tool_call>", "<|im_end|>", "<eos>"}, {4, 5}, {6});
  auto g = CompiledGrammar::FromGbnf("root ::= \"<tool_call>\" [a-z<|>_]* \"\\\"\"", vocab);
  ASSERT_TRUE(g.ok());
  Matcher m(*g);
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{0, 4}));  // the special token or its spelling
  Matcher spelled = m.Fork();
  ASSERT_TRUE(spelled.AcceptToken(0));
  EXPECT_EQ(Allowed(spelled), (std::vector<int32_t>{1}));  // no special token in the middle
  ASSERT_TRUE(m.AcceptToken(4));
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{0, 1, 2, 3}));  // text only: <|im_end|> is never text
  EXPECT_FALSE(m.AcceptToken(5));
}

TEST(MatcherTest, AmbiguousGrammarsAndPaddedMasks) {
  auto vocab = ByteVocab({"aa", "aaa", "ab"});
  auto g = CompiledGrammar::FromGbnf("root ::= (\"a\" | \"a\" \"a\")* \"b\"", vocab);
  ASSERT_TRUE(g.ok());
  Matcher m(*g);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(m.AcceptToken('a'));
  std::vector<uint32_t> mask(20, 0xFFFFFFFFu);  // wider than the vocabulary: the tail is cleared
  m.FillNextTokenMask(mask);
  for (size_t w = (vocab->size() + 31) / 32; w < mask.size(); ++w) EXPECT_EQ(mask[w], 0u);
  EXPECT_TRUE((mask['b' >> 5] >> ('b' & 31)) & 1);
  ASSERT_TRUE(m.AcceptToken(257));  // "aaa"
  ASSERT_TRUE(m.AcceptToken(258));  // "ab"
  EXPECT_TRUE(m.IsTerminated());
}

TEST(GrammarCacheTest, SharesCompiledGrammarsAndCachesErrors) {
  auto vocab = ByteVocab();
  GrammarCache cache({.capacity = 2});
  auto a = cache.Get(GrammarKind::kGbnf, "root ::= \"x\"", vocab);
  auto b = cache.Get(GrammarKind::kGbnf, "root ::= \"x\"", vocab);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_FALSE(cache.Get(GrammarKind::kGbnf, "root ::= (", vocab).ok());
  auto o = cache.GetAsync(GrammarKind::kJsonObject, "", vocab).get();
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(cache.size(), 2u);  // bounded
  auto c = cache.Get(GrammarKind::kGbnf, "root ::= \"x\"", vocab);  // evicted, compiled anew
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->get(), c->get());
}

}  // namespace
}  // namespace radixlm::grammar
