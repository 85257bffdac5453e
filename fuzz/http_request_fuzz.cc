// HTTP requests as the server reads them off a connection (serve/http_server.h): the input is
// the bytes a client sends. They go through Boost.Beast's request parser with the server's
// limits (in pieces, as reads deliver them), then the transport's decisions
// (serve/http_checks.h: RefuseHead once the head is in, ReadErrorRefusal for a parse error)
// and its error body writer (TransportErrorBody, which quotes client bytes); a request that
// passes has its body parsed as a route parses it (ParseBody: depth and memory bounds) and
// checked as a completion request. Invariants: no exception escapes (the I/O thread must never
// throw), every refusal body is valid UTF-8 JSON, every status is one the transport documents.
#include <cstdint>
#include <string>
#include <string_view>

#include <boost/beast/core/buffers_prefix.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "serve/completion_request.h"
#include "serve/http_checks.h"
#include "serve/http_common.h"

namespace {

namespace bhttp = boost::beast::http;
namespace serve = radixlm::serve;

constexpr size_t kMaxHeader = 2048, kMaxBody = 8192;  // the server's, scaled to fuzz input sizes

void CheckRefusal(const serve::HttpRefusal& r) {
  switch (r.status) {
    case 400: case 408: case 413: case 415: case 417: case 431: case 501: break;
    default: radixlm::fuzz::Fail("a refusal with an undocumented status");
  }
  const std::string body = serve::TransportErrorBody(r.status, r.message);
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);  // strict UTF-8
  if (j.is_discarded() || !j.contains("error")) radixlm::fuzz::Fail("a refusal body that is not the API's JSON error");
}

void Body(const std::string& body) {
  serve::ApiError err;
  const auto parsed = serve::ParseBody(body, &err);
  if (!parsed) {
    (void)radixlm::core::JsonText(serve::ErrorBody(err));
    return;
  }
  const auto& tok = radixlm::fuzz::MinimalTokenizer();
  const serve::CompletionLimits limits{.model_name = "radixlm", .stop_ids = {tok.TokenId("<|im_end|>")}};
  serve::CompletionRequest request;
  if (!serve::ParseCompletionRequest(*parsed, /*chat=*/true, limits, &request, &err)) (void)radixlm::core::JsonText(serve::ErrorBody(err));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  // Pipelined requests, one after another, until the bytes run out or one is refused.
  for (int request = 0; request < 4 && !rest.empty(); ++request) {
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(kMaxHeader);
    parser.body_limit(kMaxBody);
    boost::system::error_code ec;
    bool head_checked = false;
    // Reads deliver a few bytes at a time; Beast consumes nothing until a whole head (or
    // chunk line) is there, so the window grows until it does, as the server's buffer does.
    const size_t step = 7 + (size % 5) * 64;
    size_t window = step;
    for (;;) {
      const size_t offer = std::min(window, rest.size());
      ec = {};
      const size_t used = parser.put(boost::asio::buffer(rest.data(), offer), ec);
      rest.remove_prefix(used);
      if (ec == bhttp::error::need_more) ec = {};
      if (ec) break;
      if (parser.is_header_done() && !head_checked) {
        head_checked = true;
        if (auto refusal = serve::RefuseHead(parser.get().base())) {
          CheckRefusal(*refusal);
          return 0;  // the connection closes after a refusal
        }
      }
      if (parser.is_done()) break;
      if (used > 0) {
        window = step;
      } else if (offer == rest.size()) {
        break;  // the client sent no more: a partial request
      } else {
        window += step;
      }
    }
    if (ec) {
      if (auto refusal = serve::ReadErrorRefusal(ec, false, parser.is_header_done() ? "body" : "head", 10, kMaxHeader, kMaxBody))
        CheckRefusal(*refusal);
      return 0;
    }
    if (!parser.is_done()) {  // the bytes ended mid-request: the deadline answers it
      if (auto refusal = serve::ReadErrorRefusal({}, true, parser.is_header_done() ? "body" : "head", 10, kMaxHeader, kMaxBody))
        CheckRefusal(*refusal);
      return 0;
    }
    Body(parser.get().body());
  }
  return 0;
}
