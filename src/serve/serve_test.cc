// The completion route's units, without a server or a model: request parsing, the stop-string
// filter, and the JSON / SSE writers.
#include <gtest/gtest.h>

#include "serve/completion_request.h"
#include "serve/completion_stream.h"
#include "serve/http_common.h"

namespace radixlm::serve {
namespace {

using nlohmann::json;

const CompletionLimits kLimits{"m", 64, {2}};

bool Parse(const std::string& body, bool chat, CompletionRequest* out, ApiError* err) {
  return ParseCompletionRequest(nlohmann::ordered_json::parse(body), chat, kLimits, out, err);
}

TEST(CompletionRequest, ReadsTheFieldsAClientSends) {
  CompletionRequest r;
  ApiError e;
  ASSERT_TRUE(Parse(R"({"model": "m", "prompt": [5, 6, 7], "max_tokens": 9, "temperature": 0, "seed": 3, "stop": ["a", "bc"],
                       "stream": true, "stream_options": {"include_usage": false}, "return_token_ids": true,
                       "cache_salt": "tenant-a"})",
                    false, &r, &e));
  EXPECT_TRUE(r.prompt_is_ids);
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(r.params.max_tokens, 9);
  EXPECT_FALSE(r.default_max_tokens);
  EXPECT_EQ(r.params.sampling.temperature, 0);
  EXPECT_EQ(r.params.sampling.seed, 3u);
  EXPECT_EQ(r.stop_strings, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r.stream && r.return_token_ids && !r.include_usage);
  EXPECT_EQ(r.params.stop_ids, kLimits.stop_ids);
  EXPECT_EQ(r.params.cache_salt, "tenant-a");

  ASSERT_TRUE(Parse(R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})",
                    true, &r, &e));
  ASSERT_EQ(r.chat_vars["messages"].size(), 2u);
  EXPECT_EQ(r.chat_vars["messages"][1]["content"], "ab");
  EXPECT_TRUE(r.default_max_tokens);
  EXPECT_EQ(r.params.max_tokens, 64);
  ASSERT_TRUE(Parse(R"({"prompt": ["one string"], "stop": "x"})", false, &r, &e));
  EXPECT_EQ(r.prompt_text, "one string");
  EXPECT_EQ(r.stop_strings, (std::vector<std::string>{"x"}));
}

TEST(CompletionRequest, RefusesWhatItWouldMisreadWithTheRightStatusAndParam) {
  struct Case {
    const char* body;
    bool chat;
    int status;
    const char* param;
  };
  const std::string long_stop = R"({"prompt": "x", "stop": ")" + std::string(1025, 'a') + R"("})";
  const Case cases[] = {
      {R"({"prompt": "x", "model": "other"})", false, 404, "model"},
      {R"({"prompt": "x", "model": 7})", false, 400, "model"},
      {R"({"prompt": "x", "max_tokens": 0})", false, 400, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 4294967297})", false, 400, "max_tokens"},  // would wrap to 1
      {R"({"prompt": "x", "max_tokens": true})", false, 400, "max_tokens"},
      {R"({"prompt": "x", "temperature": 3})", false, 400, "temperature"},
      {R"({"prompt": "x", "n": 17})", false, 400, "n"},
      {R"({"prompt": "x", "n": 0})", false, 400, "n"},
      {R"({"prompt": "x", "n": 3, "best_of": 2})", false, 400, "best_of"},
      {R"({"prompt": "x", "best_of": 17})", false, 400, "best_of"},
      {R"({"prompt": "x", "best_of": 2, "stream": true})", false, 400, "best_of"},
      {R"({"prompt": "x", "logprobs": 21})", false, 400, "logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 2})", true, 400, "logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", true, 400, "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})", true, 400, "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "a b"}}]})", true, 400, "tools"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema"}})", true, 400, "response_format"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}})", true, 400, "response_format"},
      {R"({"messages": [{"role": "user", "content": "x"}], "grammar": 5})", true, 400, "grammar"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"messages": []}})", true, 400, "chat_template_kwargs"},
      {R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})", true, 400, "messages"},
      {R"({"prompt": "x", "tools": [{"type": "function"}]})", false, 400, "tools"},
      {R"({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]})", false, 400, "stop"},
      {R"({"prompt": "x", "stop": 5})", false, 400, "stop"},
      {long_stop.c_str(), false, 400, "stop"},  // over --max-stop-bytes
      {R"({"prompt": "x", "stream_options": 1})", false, 400, "stream_options"},
      {R"({"prompt": [1, -2147483649]})", false, 400, "prompt"},
      {R"({"prompt": {"a": 1}})", false, 400, "prompt"},
      {R"({"prompt": "x", "cache_salt": ""})", false, 400, "cache_salt"},
      {R"({"prompt": "x", "cache_salt": 7})", false, 400, "cache_salt"},
      {R"({})", false, 400, "prompt"},
      {R"({"messages": []})", true, 400, "messages"},
      {R"({"messages": [{"content": "x"}]})", true, 400, "messages"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", true, 400, "messages"},
      {R"({"messages": [{"role": "user", "content": 5}]})", true, 400, "messages"},
  };
  for (const Case& c : cases) {
    CompletionRequest r;
    ApiError e;
    EXPECT_FALSE(Parse(c.body, c.chat, &r, &e)) << c.body;
    EXPECT_EQ(e.status, c.status) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_FALSE(e.message.empty());
  }
  // The "off" values of unsupported options pass.
  CompletionRequest r;
  ApiError e;
  EXPECT_TRUE(Parse(R"({"prompt": "x", "logprobs": null, "echo": false, "best_of": 1, "response_format": {"type": "text"}})",
                    false, &r, &e))
      << e.message;
  // Chat: tools, a tool call in the history (its arguments handed to the template as an object),
  // template keyword arguments, logprobs.
  ASSERT_TRUE(Parse(R"({"messages": [{"role": "user", "content": "w?"}, {"role": "assistant", "content": null, "tool_calls": [
      {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"b\": 1, \"a\": 2}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "ok"}], "tools": [{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"b": {}, "a": {}}}}}], "tool_choice": {"type": "function", "function": {"name": "f"}},
      "chat_template_kwargs": {"enable_thinking": false}, "logprobs": true, "top_logprobs": 3})", true, &r, &e)) << e.message;
  EXPECT_EQ(r.chat_vars["messages"][1]["tool_calls"][0]["function"]["arguments"].dump(), R"({"b":1,"a":2})");  // client's order
  EXPECT_EQ(r.chat_vars["tools"][0]["function"]["parameters"]["properties"].begin().key(), "b");
  EXPECT_EQ(r.chat_vars["enable_thinking"], false);
  EXPECT_EQ(r.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_FALSE(ParseCompletionRequest(json::array(), false, kLimits, &r, &e));  // not an object
  EXPECT_EQ(r.best_of, 1);
  ASSERT_TRUE(Parse(R"({"prompt": "x", "n": 2, "best_of": 5})", false, &r, &e)) << e.message;
  EXPECT_EQ(r.best_of, 5);
  ASSERT_TRUE(Parse(R"({"prompt": "x", "n": 2, "best_of": 2, "stream": true})", false, &r, &e)) << e.message;
}

// Issue 25.8: the options users rely on are read; every other field is refused by name, never
// dropped (21 of them once returned 200 without their effect).
TEST(CompletionRequest, ReadsPenaltiesAndStopOptionsAndRefusesUnknownFieldsByName) {
  CompletionRequest r;
  ApiError e;
  ASSERT_TRUE(Parse(R"({"prompt": "x", "max_tokens": 8, "presence_penalty": 0.5, "frequency_penalty": -1, "repetition_penalty": 1.3,
                       "min_p": 0.05, "min_tokens": 3, "stop_token_ids": [7, 9], "user": "u-1"})",
                    false, &r, &e))
      << e.message;
  EXPECT_FLOAT_EQ(r.params.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.params.sampling.frequency_penalty, -1.0f);
  EXPECT_FLOAT_EQ(r.params.sampling.repetition_penalty, 1.3f);
  EXPECT_FLOAT_EQ(r.params.sampling.min_p, 0.05f);
  EXPECT_EQ(r.params.min_tokens, 3);
  EXPECT_EQ(r.params.stop_ids, (std::vector<int32_t>{2, 7, 9}));  // the model's, then the request's
  ASSERT_TRUE(Parse(R"({"prompt": "x", "ignore_eos": true, "stop_token_ids": [9]})", false, &r, &e)) << e.message;
  EXPECT_EQ(r.params.stop_ids, (std::vector<int32_t>{9}));
  ASSERT_TRUE(Parse(R"({"prompt": "x", "ignore_eos": true})", false, &r, &e)) << e.message;
  EXPECT_TRUE(r.params.stop_ids.empty());
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"prompt": "x", "presence_penalty": 2.5})", "presence_penalty"},
      {R"({"prompt": "x", "frequency_penalty": "a"})", "frequency_penalty"},
      {R"({"prompt": "x", "repetition_penalty": 0})", "repetition_penalty"},
      {R"({"prompt": "x", "min_p": 1.5})", "min_p"},
      {R"({"prompt": "x", "max_tokens": 4, "min_tokens": 5})", "min_tokens"},
      {R"({"prompt": "x", "stop_token_ids": [-1]})", "stop_token_ids"},
      {R"({"prompt": "x", "stop_token_ids": 3})", "stop_token_ids"},
      {R"({"prompt": "x", "ignore_eos": 1})", "ignore_eos"},
      {R"({"prompt": "x", "guided_json": {"type": "object"}})", "guided_json"},
      {R"({"prompt": "x", "guided_regex": "a+"})", "guided_regex"},
      {R"({"prompt": "x", "guided_choice": ["a"]})", "guided_choice"},
      {R"({"prompt": "x", "functions": [{"name": "f"}]})", "functions"},
      {R"({"prompt": "x", "use_beam_search": true})", "use_beam_search"},
      {R"({"prompt": "x", "length_penalty": 1.0})", "length_penalty"},
      {R"({"prompt": "x", "tool_choice": "auto"})", "tool_choice"},
      {R"({"prompt": "x", "frobnicate": 1})", "frobnicate"},
      {R"({"prompt": "x", "Temperature": 0.5})", "Temperature"},  // names are case-sensitive, as OpenAI's
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(Parse(c.body, false, &r, &e)) << c.body;
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_NE(e.message.find(c.param), std::string::npos) << e.message;
  }
}

// Issue 25.2: a body is parsed with bounded nesting and memory (core/json_text.h).
TEST(RequestBody, NestingAndMemoryAreBoundedBeforeTheDocumentIsBuilt) {
  ApiError e;
  ASSERT_TRUE(ParseBody(R"({"prompt": [1, 2, 3], "x": [[[[1]]]]})", &e).has_value());
  EXPECT_FALSE(ParseBody(std::string(129, '[') + std::string(129, ']'), &e).has_value());
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("128 deep"), std::string::npos) << e.message;
  EXPECT_TRUE(ParseBody(std::string(128, '[') + std::string(128, ']'), &e).has_value());
  std::string tiny = "[";
  for (int i = 0; i < 600000; ++i) tiny += "0,";
  tiny += "0]";  // 1.2 MB of 2-byte values: ~29 MB as a DOM, over 12 x + 4 MiB
  EXPECT_FALSE(ParseBody(tiny, &e).has_value());
  EXPECT_EQ(e.status, 413);
  std::string ids = "{\"prompt\": [";
  for (int i = 0; i < 150000; ++i) ids += std::to_string(100000 + i) + ",";
  ids += "1]}";  // a long prompt of real token ids passes
  EXPECT_TRUE(ParseBody(ids, &e).has_value()) << e.message;
  EXPECT_FALSE(ParseBody(std::string("{\"a\": 1}\0", 9), &e).has_value());
  EXPECT_EQ(e.code, "invalid_json");
  // Invalid UTF-8 in a string is not JSON; writing it back never throws.
  EXPECT_FALSE(ParseBody("{\"a\": \"\xff\"}", &e).has_value());
  EXPECT_EQ(core::JsonText(json("a\xff\xfe")), "\"a\xef\xbf\xbd\xef\xbf\xbd\"");
  EXPECT_NE(TransportErrorBody(415, "Content-Encoding '\xff'").find("\xef\xbf\xbd"), std::string::npos);
}

// The prompt plus every sample's max_tokens: what one request may ask the server to hold.
TEST(CompletionRequest, TotalTokensAreBoundedWithTheLimitNamed) {
  CompletionLimits limits = kLimits;
  limits.max_total_tokens = 100;
  CompletionRequest r;
  ApiError err;
  ASSERT_TRUE(ParseCompletionRequest(json::parse(R"({"prompt": "x", "max_tokens": 30, "n": 3})"), false, limits, &r, &err));
  r.params.prompt.assign(10, 1);
  EXPECT_TRUE(CheckRequestSize(r, limits, &err));  // 10 + 3 x 30 = 100
  r.params.prompt.assign(11, 1);
  ASSERT_FALSE(CheckRequestSize(r, limits, &err));
  EXPECT_EQ(err.status, 400);
  EXPECT_NE(err.message.find("--max-total-tokens"), std::string::npos) << err.message;
  EXPECT_NE(err.message.find("101"), std::string::npos) << err.message;
  limits.max_stop_strings = 1;
  EXPECT_FALSE(ParseCompletionRequest(json::parse(R"({"prompt": "x", "stop": ["a", "b"]})"), false, limits, &r, &err));
  EXPECT_NE(err.message.find("up to 1 strings"), std::string::npos) << err.message;
}

TEST(CompletionRequest, BestOfReturnsTheMostLikelySamplesBestFirst) {
  EXPECT_EQ(BestOf({-3.0, -1.0, -2.0, -1.0}, 2), (std::vector<int>{1, 3}));  // a tie: the lower index first
  EXPECT_EQ(BestOf({-3.0, -1.0, -2.0}, 3), (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(BestOf({-0.5}, 1), (std::vector<int>{0}));
}

// Feeds `pieces` one by one; returns the concatenated output and the pieces emitted.
std::pair<std::string, std::vector<std::string>> Filter(std::vector<std::string> stops, const std::vector<std::string>& pieces,
                                                        bool* stopped = nullptr) {
  StopStringFilter f(std::move(stops));
  std::string all;
  std::vector<std::string> out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    out.push_back(f.Push(pieces[i], i + 1 == pieces.size()));
    all += out.back();
  }
  if (stopped) *stopped = f.stopped();
  return {all, out};
}

TEST(StopStringFilter, NeverEmitsAStopStringOrTheStartOfOne) {
  bool stopped;
  // "END" split over three pieces: "E" and "N" are held, then cut.
  auto [text, pieces] = Filter({"END"}, {"abc E", "N", "D tail", "more"}, &stopped);
  EXPECT_EQ(text, "abc ");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(pieces[0], "abc ");  // "E" held back
  EXPECT_EQ(pieces[1], "");
  // A held prefix that turns out not to be a stop string is released.
  std::tie(text, pieces) = Filter({"END"}, {"x E", "Nd", "!"}, &stopped);
  EXPECT_EQ(text, "x ENd!");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(pieces[0], "x ");
  EXPECT_EQ(pieces[1], "ENd");
  // The earliest of several stop strings wins, whatever their order in the list.
  std::tie(text, pieces) = Filter({"zz", "b"}, {"a b c zz"}, &stopped);
  EXPECT_EQ(text, "a ");
  // The last piece flushes a held tail; empty stop strings are ignored.
  std::tie(text, pieces) = Filter({"", "xyz"}, {"abx", "y"}, &stopped);
  EXPECT_EQ(text, "abxy");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(pieces[0], "ab");
  // Once stopped, nothing more.
  StopStringFilter f({"s"});
  EXPECT_EQ(f.Push("as", false), "a");
  EXPECT_EQ(f.Push("bbb", true), "");
}

TEST(CompletionWriter, ShapesResponsesAndChunksAsOpenAIDoes) {
  const CompletionMeta chat{"chatcmpl-1", "m", 100, true}, text{"cmpl-1", "m", 100, false};
  engine::Usage usage;
  usage.prompt_tokens = 10;
  usage.completion_tokens = 3;
  usage.cached_tokens = 4;
  const std::vector<int32_t> ids = {7, 8};
  json r = CompletionResponse(chat, {{"hi", "length", &ids}}, usage);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["choices"][0]["token_ids"], json(ids));
  EXPECT_EQ(r["usage"]["total_tokens"], 13);
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  r = CompletionResponse(text, {{"hi", "stop", nullptr}, {"ho", "length", nullptr}}, usage);
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], "hi");
  EXPECT_FALSE(r["choices"][0].contains("token_ids"));
  EXPECT_EQ(r["choices"][1]["index"], 1);  // n = 2: choices in index order
  EXPECT_EQ(r["choices"][1]["text"], "ho");
  EXPECT_EQ(r["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(CompletionChunk(text, "x", nullptr, false, nullptr, 3)["choices"][0]["index"], 3);

  json c = CompletionChunk(chat, "", nullptr, /*first=*/true, nullptr);
  EXPECT_EQ(c["object"], "chat.completion.chunk");
  EXPECT_EQ(c["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(c["choices"][0]["delta"]["content"], "");
  EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  c = CompletionChunk(chat, "", "stop", /*first=*/false, nullptr);
  EXPECT_TRUE(c["choices"][0]["delta"].empty());  // no role, no empty content
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  c = CompletionChunk(text, "ab", nullptr, false, &ids);
  EXPECT_EQ(c["choices"][0]["text"], "ab");
  EXPECT_EQ(c["choices"][0]["token_ids"], json(ids));
  c = UsageChunk(chat, usage);
  EXPECT_TRUE(c["choices"].empty());
  EXPECT_EQ(c["usage"]["completion_tokens"], 3);

  EXPECT_EQ(SseEvent(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  // Invalid UTF-8 in a delta is replaced, never a broken frame.
  EXPECT_NE(SseEvent(json{{"t", std::string("\xff")}}).find("\xef\xbf\xbd"), std::string::npos);
  EXPECT_STREQ(FinishReasonText(false, engine::FinishReason::kLength), "length");
  EXPECT_STREQ(FinishReasonText(true, engine::FinishReason::kLength), "stop");
  EXPECT_STREQ(FinishReasonText(false, engine::FinishReason::kStop), "stop");
}

}  // namespace
}  // namespace radixlm::serve
