// The transport's decisions about a request that need no socket (serve/http_server.h says why
// each refusal is made): what to refuse once the head is parsed, and how a parse or read error
// is answered. Kept apart from the connection state machine so that a fuzz target
// (fuzz/http_request_fuzz.cc) drives Boost.Beast's parser, these decisions and the error body
// writer exactly as a connection does, without a socket. Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/system/error_code.hpp>

namespace radixlm::serve {

struct HttpRefusal {
  int status = 400;
  std::string message;  // may quote client bytes: write it with core::JsonText
};

using HttpRequestHead = boost::beast::http::request_header<>;

// ASCII case-insensitive equality (header names and tokens).
bool IEquals(std::string_view a, std::string_view b);

// A parsed head that must not be read further: both Content-Length and Transfer-Encoding (400),
// a transfer coding other than chunked (501), a content coding other than identity (415), an
// Expect other than 100-continue (417). nullopt: read the body.
std::optional<HttpRefusal> RefuseHead(const HttpRequestHead& head);

// How a failed read of the head or body is answered: a deadline (timed_out: 408), a head or
// body over its limit (431, 413), malformed HTTP (400); nullopt: the client went away (close).
std::optional<HttpRefusal> ReadErrorRefusal(boost::system::error_code ec, bool timed_out, std::string_view part,
                                            double timeout_s, size_t max_header_bytes, size_t max_body_bytes);

}  // namespace radixlm::serve
