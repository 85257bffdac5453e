// Tool-call formats (parsing each family's output, the forcing grammars), the reasoning split
// and the choice pipeline's streaming (deltas add up to the final message).
#include "serve/tool_calls.h"

#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "serve/choice_output.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::serve {
namespace {

using ojson = nlohmann::ordered_json;

std::vector<Tool> WeatherTools() {
  Tool t;
  t.name = "get_weather";
  t.parameters = ojson::parse(R"({"type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
                                  "required": ["location"]})");
  return {t};
}

TEST(ToolCalls, DetectsEachFamilyFromItsTemplate) {
  EXPECT_STREQ(DetectToolFormat("... <tool_call>\\n{\"name\": ...")->name, "hermes");
  EXPECT_STREQ(DetectToolFormat("<tool_call>\\n<function=example>")->name, "qwen3_coder");
  EXPECT_STREQ(DetectToolFormat("{{- \"[TOOL_CALLS][\" }}")->name, "mistral");
  EXPECT_STREQ(DetectToolFormat("<|start|>assistant<|channel|>final")->name, "harmony");
  EXPECT_STREQ(DetectToolFormat("<|python_tag|>")->name, "llama3_json");
  EXPECT_STREQ(DetectToolFormat("\"List of tools: [\" -%}")->name, "pythonic");
  EXPECT_EQ(DetectToolFormat("{{ messages }}"), nullptr);
}

using Strings = std::vector<std::string>;

// A complete output in the named format, parsed against WeatherTools().
ParsedOutput Parse(const char* format, const std::string& text) { return FindToolFormat(format)->parse(text, WeatherTools()); }

// The parsed calls' arguments, in order.
Strings Arguments(const ParsedOutput& p) {
  Strings out;
  for (const ToolCall& c : p.calls) out.push_back(c.arguments);
  return out;
}

TEST(ToolCalls, ParsesEachFormat) {
  const ParsedOutput hermes = Parse("hermes",
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"location\\\": \\\"Rome\\\"}\"}\n</tool_call>");
  EXPECT_EQ(hermes.content, "Let me check.");
  EXPECT_EQ(Arguments(hermes), (Strings{R"({"location":"Paris"})", R"({"location":"Rome"})"}));
  EXPECT_EQ(Arguments(Parse("qwen3_coder",
                            "<tool_call>\n<function=get_weather>\n<parameter=location>\nNew York\n</parameter>\n"
                            "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")),
            Strings{R"({"location":"New York","days":3})"});
  const ParsedOutput llama = Parse("llama3_json", "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Oslo\"}}");
  ASSERT_EQ(llama.calls.size(), 1u);
  EXPECT_EQ(llama.calls[0].name, "get_weather");
  EXPECT_EQ(Parse("mistral", "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Lima\"}}]").calls.size(), 1u);
  const ParsedOutput harmony = Parse("harmony",
      "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
      "<|constrain|>json<|message|>{\"location\": \"Kyiv\"}<|call|>");
  EXPECT_EQ(harmony.reasoning, "Need weather.");
  EXPECT_EQ(Arguments(harmony), Strings{R"({"location":"Kyiv"})"});
  // Not calls: all content, never a made-up call.
  const ParsedOutput broken = Parse("hermes", "<tool_call>\n{\"name\": \"get_weather\", \"argu");
  EXPECT_TRUE(broken.calls.empty());
  EXPECT_EQ(broken.content, "<tool_call>\n{\"name\": \"get_weather\", \"argu");
  EXPECT_TRUE(Parse("llama3_json", "Hello {there}").calls.empty());
}

TEST(ToolCalls, ForcingGrammarsParseForEveryFormat) {
  const auto tools = WeatherTools();
  for (const char* name : {"hermes", "qwen3_coder", "llama3_json", "mistral", "harmony", "pythonic"})
    for (bool reasoning : {false, true}) {
      auto g = ToolCallGrammar(*FindToolFormat(name), tools, true, reasoning);
      ASSERT_TRUE(g.ok()) << name << ": " << g.status().message();
      EXPECT_TRUE(grammar::ParseGbnf(*g).ok()) << name << "\n" << *g;
    }
}

// Whether the forcing grammar of `tools` in `format` (parallel calls) accepts `text`, byte by byte.
bool GrammarAccepts(const char* format, std::span<const Tool> tools, const std::string& text) {
  auto g = ToolCallGrammar(*FindToolFormat(format), tools, true, false);
  EXPECT_TRUE(g.ok()) << g.status().message();
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  bytes.push_back("</s>");
  auto vocab = std::make_shared<const grammar::Vocabulary>(std::move(bytes), std::vector<int32_t>{}, std::vector<int32_t>{256});
  auto compiled = grammar::CompiledGrammar::FromGbnf(*g, vocab);
  EXPECT_TRUE(compiled.ok()) << compiled.status().message() << "\n" << *g;
  if (!compiled.ok()) return false;
  grammar::Matcher m(*compiled);
  return m.AcceptBytes(text) && m.IsCompleted();
}

// LFM2's pythonic calls: Python literals parsed into JSON arguments; positional arguments or
// anything else that is not a call list stay content; the forcing grammar writes Python's
// literals, required parameters always and optional ones in schema order; a conversation's
// earlier calls go back into the content in the same text, which parses to the same calls.
TEST(ToolCalls, PythonicCallsParseConstrainAndRoundTrip) {
  const ParsedOutput two = Parse("pythonic",
      "Checking.<|tool_call_start|>[get_weather(location=\"Paris\", days=3), get_weather(location='Rome')]<|tool_call_end|>");
  EXPECT_EQ(two.content, "Checking.");
  EXPECT_EQ(Arguments(two), (Strings{R"({"location":"Paris","days":3})", R"({"location":"Rome"})"}));
  const ParsedOutput literals = Parse("pythonic",
      "<|tool_call_start|>[f(a=True, b=None, c=[1, 2.5, 'x'], d={'k': False}, e=\"q\\\"uote\\n\", g=-1e3)]<|tool_call_end|>");
  EXPECT_EQ(Arguments(literals), Strings{R"({"a":true,"b":null,"c":[1,2.5,"x"],"d":{"k":false},"e":"q\"uote\n","g":-1000.0})"});
  const ParsedOutput escapes = Parse("pythonic", "<|tool_call_start|>[f(s='a\\bb\\fc\\td\\\\e\\'f')]<|tool_call_end|>");
  EXPECT_EQ(Arguments(escapes), Strings{R"({"s":"a\bb\fc\td\\e'f"})"});  // Python's \b \f \t \\ \'
  for (const char* not_calls : {"<|tool_call_start|>[get_weather(\"Paris\")]<|tool_call_end|>",
                                "<|tool_call_start|>[get_weather(location=Paris)]", "<|tool_call_start|>get_weather()"}) {
    const ParsedOutput p = Parse("pythonic", not_calls);
    EXPECT_TRUE(p.calls.empty()) << not_calls;
    EXPECT_EQ(p.content, not_calls);
  }
  Tool flags;
  flags.name = "set_flags";
  flags.parameters = ojson::parse(R"({"type": "object", "properties": {"on": {"type": "boolean"}, "note": {"type": "string"},
                                      "level": {"type": "integer"}}, "required": ["level"]})");
  const std::vector<Tool> tools = {WeatherTools()[0], flags};
  EXPECT_TRUE(GrammarAccepts("pythonic", tools, "<|tool_call_start|>[get_weather(location=\"Oslo\")]<|tool_call_end|>"));
  EXPECT_TRUE(GrammarAccepts("pythonic", tools,
                             "<|tool_call_start|>[get_weather(location=\"Oslo\", days=2), set_flags(on=True, level=3)]<|tool_call_end|>"));
  EXPECT_TRUE(GrammarAccepts("pythonic", tools, "<|tool_call_start|>[set_flags(level=1)]<|tool_call_end|>"));
  EXPECT_FALSE(GrammarAccepts("pythonic", tools, "<|tool_call_start|>[set_flags(on=true, level=1)]<|tool_call_end|>"));
  EXPECT_FALSE(GrammarAccepts("pythonic", tools, "<|tool_call_start|>[set_flags(on=True)]<|tool_call_end|>"));
  EXPECT_FALSE(GrammarAccepts("pythonic", tools, "<|tool_call_start|>[get_weather(days=2, location=\"Oslo\")]<|tool_call_end|>"));
  // History: an assistant turn's tool_calls into its content, for a template that never reads them.
  ojson vars = {{"messages", ojson::array({{{"role", "assistant"}, {"content", ""},
      {"tool_calls", ojson::array({{{"id", "c1"}, {"type", "function"},
                                    {"function", {{"name", "set_flags"}, {"arguments", {{"on", false}, {"level", 2}, {"note", "a\"b"}}}}}}})}}})}};
  CallsIntoContent("List of tools: [", &vars);
  const std::string text = vars["messages"][0]["content"].get<std::string>();
  EXPECT_EQ(text, "<|tool_call_start|>[set_flags(on=False, level=2, note=\"a\\\"b\")]<|tool_call_end|>");
  EXPECT_FALSE(vars["messages"][0].contains("tool_calls"));
  EXPECT_EQ(Arguments(Parse("pythonic", text)), Strings{R"({"on":false,"level":2,"note":"a\"b"})"});
  ojson kept = {{"messages", ojson::array({{{"role", "assistant"}, {"tool_calls", ojson::array()}}})}};
  CallsIntoContent("{% for c in message.tool_calls %}List of tools: [", &kept);  // the template reads them itself
  EXPECT_TRUE(kept["messages"][0].contains("tool_calls"));
}

TEST(ToolCalls, StrictObjectsClosesDeclaredObjectsOnly) {
  const ojson s = StrictObjects(ojson::parse(R"({"type": "object", "properties": {"a": {"type": "object", "properties": {}},
      "b": {"type": "object", "additionalProperties": true}}})"));
  EXPECT_EQ(s["additionalProperties"], false);
  EXPECT_EQ(s["properties"]["a"]["additionalProperties"], false);
  EXPECT_EQ(s["properties"]["b"]["additionalProperties"], true);
}

TEST(ToolCalls, ReasoningSplit) {
  std::string r, rest;
  SplitReasoning("<think>\nplan\n</think>\n\nanswer", false, &r, &rest);
  EXPECT_EQ(r, "\nplan\n");
  EXPECT_EQ(rest, "answer");
  SplitReasoning("plan</think>answer", true, &r, &rest);
  EXPECT_EQ(r, "plan");
  EXPECT_EQ(rest, "answer");
  SplitReasoning("just text", false, &r, &rest);
  EXPECT_EQ(r, "");
  EXPECT_EQ(rest, "just text");
}

std::unique_ptr<tokenizer::Tokenizer> Qwen3() {
  const char* src = std::getenv("RADIXLM_SOURCE_DIR");
  auto t = tokenizer::Tokenizer::Named("qwen3", std::string(src ? src : ".") + "/third_party_data/npm/node_modules");
  return t.ok() ? std::move(*t) : nullptr;
}

// Feeds `text` token by token (the last event finishing); returns the deltas added up, and in
// *early what the events before the last one sent.
ChoiceDelta Feed(ChoiceOutput* out, const tokenizer::Tokenizer& tok, const std::string& text, int32_t eos,
                 ChoiceDelta* early = nullptr) {
  std::vector<int32_t> ids = tok.Encode(text);
  ids.push_back(eos);
  ChoiceDelta sum;
  sum.tool_calls = nullptr;
  for (size_t i = 0; i < ids.size(); ++i) {
    engine::TokenEvent ev;
    ev.token = ids[i];
    ev.logprob = -1.5f;
    ev.top_logprobs = {{ids[i], -1.5f}};
    if (i + 1 == ids.size()) ev.finish = engine::FinishReason::kStop;
    ChoiceDelta d = out->Push(ev);
    if (early && i + 1 < ids.size()) {
      early->content += d.content;
      early->reasoning += d.reasoning;
    }
    sum.content += d.content;
    sum.reasoning += d.reasoning;
    if (!d.tool_calls.is_null()) sum.tool_calls = d.tool_calls;
  }
  return sum;
}

// A chat choice ending at `eos` whose calls to WeatherTools() are parsed in `format`.
ChoiceSetup ChatSetup(int32_t eos, const char* format) {
  ChoiceSetup s;
  s.chat = true;
  s.stop_ids = {eos};
  s.tool_format = FindToolFormat(format);
  s.tools = WeatherTools();
  return s;
}

TEST(ChoiceOutput, StreamedDeltasAddUpToTheMessage) {
  auto tok = Qwen3();
  if (!tok) GTEST_SKIP() << "tokenizer data not fetched (scripts/setup.sh)";
  const int32_t eos = tok->TokenId("<|im_end|>");
  ChoiceSetup setup = ChatSetup(eos, "hermes");
  setup.reasoning = true;
  setup.top_logprobs = 1;
  const std::string text = "<think>\nThe user wants weather.\n</think>\n\nChecking.\n<tool_call>\n"
                           "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>";
  ChoiceOutput out(*tok, setup);
  const ChoiceDelta sum = Feed(&out, *tok, text, eos);
  EXPECT_EQ(sum.reasoning, "\nThe user wants weather.\n");
  EXPECT_EQ(sum.content, "Checking.\n");
  ASSERT_TRUE(sum.tool_calls.is_array());
  EXPECT_EQ(sum.tool_calls[0]["function"]["arguments"], R"({"location":"Paris"})");
  EXPECT_EQ(out.Final().reasoning, sum.reasoning);
  EXPECT_EQ(out.Final().content, "Checking.");
  ASSERT_EQ(out.Final().calls.size(), 1u);
  EXPECT_EQ(out.Final().calls[0].id, sum.tool_calls[0]["id"]);
  EXPECT_STREQ(out.FinishReason(engine::FinishReason::kStop), "tool_calls");
  // One logprobs entry per generated token but the stop token.
  EXPECT_EQ(out.AllLogprobs()["content"].size(), tok->Encode(text).size());

  // A prompt that opens <think> starts the output in reasoning; no calls means plain content.
  setup.starts_in_reasoning = true;
  setup.tool_format = nullptr;
  ChoiceOutput plain(*tok, setup);
  const ChoiceDelta s2 = Feed(&plain, *tok, "hmm</think>\n\nHello <b>", eos);
  EXPECT_EQ(s2.reasoning, "hmm");
  EXPECT_EQ(s2.content, "Hello <b>");
  EXPECT_STREQ(plain.FinishReason(engine::FinishReason::kStop), "stop");
}

// Harmony (gpt-oss) streams while it is generated: the analysis channel as reasoning, the final
// channel as content, each as soon as its tokens arrive (not at the end); a message to a
// function is held and sent as its call. The deltas add up to the parsed message.
// LFM2's pythonic calls stream as the other formats: the text before the marker as content,
// nothing from the marker on, the call as delta.tool_calls when the choice ends.
TEST(ChoiceOutput, PythonicCallsStreamAfterTheirContent) {
  auto tok = Qwen3();
  if (!tok) GTEST_SKIP() << "tokenizer data not fetched (scripts/setup.sh)";
  const int32_t eos = tok->TokenId("<|im_end|>");
  ChoiceSetup setup = ChatSetup(eos, "pythonic");
  const std::string text = "Sure.<|tool_call_start|>[get_weather(location=\"Paris\", days=2)]<|tool_call_end|>";
  ChoiceOutput out(*tok, setup);
  const ChoiceDelta sum = Feed(&out, *tok, text, eos);
  EXPECT_EQ(sum.content, "Sure.");
  ASSERT_TRUE(sum.tool_calls.is_array());
  ASSERT_EQ(sum.tool_calls.size(), 1u);
  EXPECT_EQ(sum.tool_calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(sum.tool_calls[0]["function"]["arguments"], R"({"location":"Paris","days":2})");
  EXPECT_STREQ(out.FinishReason(engine::FinishReason::kStop), "tool_calls");
}

TEST(ChoiceOutput, HarmonyStreamsEachChannelAsItIsGenerated) {
  auto tok = Qwen3();
  if (!tok) GTEST_SKIP() << "tokenizer data not fetched (scripts/setup.sh)";
  const int32_t eos = tok->TokenId("<|im_end|>");
  ChoiceSetup setup = ChatSetup(eos, "harmony");
  setup.harmony = true;
  const std::string text = "<|channel|>analysis<|message|>Need the weather in Paris.<|end|>"
                           "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                           "{\"location\": \"Paris\"}<|call|>";
  ChoiceOutput out(*tok, setup);
  ChoiceDelta early;
  const ChoiceDelta sum = Feed(&out, *tok, text, eos, &early);
  EXPECT_EQ(sum.content.find("<|"), std::string::npos) << sum.content;
  EXPECT_EQ(sum.reasoning, "Need the weather in Paris.");
  EXPECT_EQ(early.reasoning, sum.reasoning) << "the reasoning streamed before the end";
  EXPECT_EQ(sum.content, "");
  ASSERT_TRUE(sum.tool_calls.is_array());
  EXPECT_EQ(sum.tool_calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(sum.tool_calls[0]["function"]["arguments"], R"({"location":"Paris"})");
  EXPECT_STREQ(out.FinishReason(engine::FinishReason::kStop), "tool_calls");

  // Reasoning then a final answer: both stream, and add up to the message.
  ChoiceOutput answer(*tok, setup);
  ChoiceDelta early2;
  const ChoiceDelta s2 = Feed(&answer, *tok,
                              "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>"
                              "It is <b>sunny</b> today.",
                              eos, &early2);
  EXPECT_FALSE(early2.content.empty()) << "the final channel streamed before the end";
  EXPECT_EQ(s2.reasoning, "Easy.");
  EXPECT_EQ(s2.content, "It is <b>sunny</b> today.");
  EXPECT_EQ(answer.Final().content, s2.content);
  EXPECT_EQ(answer.Final().reasoning, s2.reasoning);
  EXPECT_TRUE(s2.tool_calls.is_null());
}

}  // namespace
}  // namespace radixlm::serve
