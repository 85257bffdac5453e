#include "serve/http_checks.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>

namespace radixlm::serve {
namespace {

namespace bhttp = boost::beast::http;
namespace asio = boost::asio;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string_view SV(boost::beast::string_view s) { return {s.data(), s.size()}; }

}  // namespace

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::optional<HttpRefusal> RefuseHead(const HttpRequestHead& h) {
  const auto te = h.find(bhttp::field::transfer_encoding);
  if (h.find(bhttp::field::content_length) != h.end() && te != h.end())
    return HttpRefusal{400, "a request must not carry both Content-Length and Transfer-Encoding"};
  if (te != h.end() && !IEquals(Trim(SV(te->value())), "chunked"))
    return HttpRefusal{501, "transfer coding '" + std::string(SV(te->value())) + "' is not supported (only chunked)"};
  if (const auto ce = h.find(bhttp::field::content_encoding); ce != h.end() && !IEquals(Trim(SV(ce->value())), "identity"))
    return HttpRefusal{415, "Content-Encoding '" + std::string(SV(ce->value())) + "' is not supported: send the body uncompressed"};
  if (const auto expect = h.find(bhttp::field::expect); expect != h.end() && !IEquals(Trim(SV(expect->value())), "100-continue"))
    return HttpRefusal{417, "only 'Expect: 100-continue' is supported"};
  return std::nullopt;
}

std::optional<HttpRefusal> ReadErrorRefusal(boost::system::error_code ec, bool timed_out, std::string_view part,
                                            double timeout_s, size_t max_header_bytes, size_t max_body_bytes) {
  if (timed_out || ec == boost::beast::error::timeout) {
    char msg[96];
    std::snprintf(msg, sizeof(msg), "the request %.*s did not arrive within %g s", static_cast<int>(part.size()), part.data(), timeout_s);
    return HttpRefusal{408, msg};
  }
  if (ec == bhttp::error::header_limit) return HttpRefusal{431, "the request head exceeds " + std::to_string(max_header_bytes) + " bytes"};
  if (ec == bhttp::error::body_limit) return HttpRefusal{413, "request body exceeds " + std::to_string(max_body_bytes) + " bytes"};
  if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::operation_aborted ||
      ec == asio::error::connection_reset || ec == bhttp::error::partial_message)
    return std::nullopt;
  return HttpRefusal{400, "malformed HTTP request (" + ec.message() + ")"};
}

}  // namespace radixlm::serve
