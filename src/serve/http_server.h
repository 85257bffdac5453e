// The HTTP/1.1 transport under the OpenAI server: connections, framing, limits and deadlines;
// it knows nothing of completions or models (serve::Server registers the routes).
//
// Why not cpp-httplib (which served until issue 19): it gives every connection a worker thread
// that blocks in recv with a per-read timeout, so clients that trickle one header byte a
// second, or hold idle keep-alive connections, take every worker (75 slow clients stopped
// /health); Debian's build inflates gzip bodies without a limit and cannot be built without
// it; chunked bodies escape its payload limit; it answers multi-range requests with one part
// per range; and a handler cannot learn that its client left. Measured against the same
// hostile cases (tests/hostile/http_test.py), this event-driven server holds: slow and idle
// connections cost a socket and a timer, not a thread.
//
// Design: one I/O thread runs Boost.Asio; Boost.Beast only parses requests (header and body
// limits over every framing, chunked decoding). Each connection goes
//   idle (keep-alive or new; --keep-alive-timeout) -> head (--header-timeout for the whole
//   head, not per byte) -> body (--body-timeout) -> handler -> response -> idle | close.
// Handlers that may block (completions, scoring) run on a fixed pool of worker threads; cheap
// ones (health, metrics) run inline on the I/O thread, so they answer however busy the
// workers are. While a handler runs, the socket is watched: a client that closes sets
// Request::ClientGone(), so a non-streaming handler can cancel its work. Streaming handlers
// write chunks through a StreamSink (each write waits for the socket, --write-timeout).
// Refused without reading the body: Content-Length with Transfer-Encoding (400, RFC 9112
// 6.1: request smuggling), a transfer coding other than chunked (501), a content coding other
// than identity (415: no decompression at all), bodies over the limit (413), heads over the
// limit (431), connections beyond --max-connections (503). Range is ignored (always the whole
// representation, RFC 9110 14.2 allows it). Pipelined requests are served in order.
// Threading: all connection state lives on the I/O thread; workers reach it only by posting.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace radixlm::serve {

struct HttpLimits {
  size_t max_header_bytes = 32 << 10;  // request line + headers
  size_t max_body_bytes = 8u << 20;    // after chunked decoding
  double header_timeout_s = 10;        // the whole head, from its first byte
  double body_timeout_s = 60;          // the whole body, after the head
  double keep_alive_timeout_s = 5;     // an idle connection (and a new one that sends nothing)
  double write_timeout_s = 30;         // one response write (a client that stops reading)
  int max_connections = 512;           // open at once; beyond: 503 and close
  int workers = 72;                    // threads for blocking handlers
};

struct HttpRequest {
  std::string method, target, path;                         // path: target without the query
  std::vector<std::pair<std::string, std::string>> headers;  // as received
  std::string body;
  std::shared_ptr<const std::atomic<bool>> gone;  // set by the I/O thread when the client closes

  // Case-insensitive; "" when absent.
  std::string Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
  bool ClientGone() const { return gone && gone->load(); }
};

// Where a streaming handler writes its body (sent with chunked transfer coding).
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // Blocks until the bytes are handed to the socket; false once the client is gone or too slow.
  virtual bool Write(std::string_view data) = 0;
  virtual bool Gone() const = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool close = false;  // close the connection after this response
  // Non-null: the body is streamed by this function, run on a worker after the handler.
  std::function<void(StreamSink&)> stream;

  void SetContent(std::string b, std::string type) {
    body = std::move(b);
    content_type = std::move(type);
  }
  void SetHeader(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
  void Stream(std::string type, std::function<void(StreamSink&)> fn) {
    content_type = std::move(type);
    stream = std::move(fn);
  }
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

class HttpServer {
 public:
  enum class Run { kWorker, kInline };  // kInline: cheap handlers, on the I/O thread
  // error_body: the body of the transport's own error answers (400, 404, 413, ...), so they
  // read like the API's errors.
  HttpServer(HttpLimits limits, std::function<std::string(int status, const std::string& message)> error_body);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // REQUIRES: before Bind. A path ending in '*' ("/v1/responses/*") takes every path that
  // continues its prefix with at least one byte.
  void Route(std::string method, std::string path, HttpHandler handler, Run run = Run::kWorker);
  // Runs before routing on every request; returns true when it answered (auth, counting).
  void SetPreRouting(std::function<bool(const HttpRequest&, HttpResponse&)> hook);

  // Binds host:port (port 0: any free port) without SO_REUSEPORT, so a port already in use is
  // an error; returns the bound port.
  core::StatusOr<int> Bind(const std::string& host, int port);
  // Serves until Stop(): then accepts nothing more, closes idle connections, lets requests in
  // flight finish, and returns once every connection and handler is done.
  void Serve();
  // Thread-safe; may be called before Serve or after it returned.
  void Stop();


 private:
  friend class Connection;  // http_server.cc: one client's state machine
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace radixlm::serve
