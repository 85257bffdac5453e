#include "serve/http_server.h"

#include "serve/http_checks.h"

#include <malloc.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <future>
#include <optional>
#include <unordered_map>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace radixlm::serve {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

namespace {

// Boost 1.74's beast::string_view is boost::string_view.
std::string_view SV(beast::string_view s) { return {s.data(), s.size()}; }

std::chrono::steady_clock::duration Seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

// The status line and headers; content_length nullopt: chunked transfer coding.
std::string Head(const HttpResponse& res, bool close, std::optional<size_t> content_length) {
  const std::string_view reason = SV(bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(res.status))));
  std::string h = "HTTP/1.1 " + std::to_string(res.status) + " " + std::string(reason.empty() ? "Unknown" : reason) + "\r\n";
  h += "Server: radixlm\r\nContent-Type: " + res.content_type + "\r\n";
  h += content_length ? "Content-Length: " + std::to_string(*content_length) + "\r\n" : "Transfer-Encoding: chunked\r\n";
  if (res.stream) h += "Cache-Control: no-cache\r\n";
  for (const auto& [name, value] : res.headers) h += name + ": " + value + "\r\n";
  h += close ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n";
  return h;
}

std::string ChunkFrame(std::string_view data) {
  char size[20];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string out = size;
  out.append(data);
  out += "\r\n";
  return out;
}

// A large body parses into many small heap blocks, which malloc keeps in this worker's arena
// once freed; hand the pages back so a few large requests do not leave the process large.
void ReleaseLargeBody(HttpRequest& req) {
  if (req.body.size() < (1u << 20)) return;
  std::string().swap(req.body);
  malloc_trim(0);
}

}  // namespace

std::string HttpRequest::Header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (IEquals(n, name)) return v;
  return "";
}

bool HttpRequest::HasHeader(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(), [&](const auto& h) { return IEquals(h.first, name); });
}

class Connection;

class HttpServer::Impl {
 public:
  Impl(HttpLimits limits, std::function<std::string(int, const std::string&)> error_body)
      : limits_(limits), error_body_(std::move(error_body)), acceptor_(io_), workers_(std::max(1, limits.workers)) {}

  void DoAccept();
  void StopOnIo();
  void Forget(uint64_t id);  // a connection closed (I/O thread)

  struct RouteEntry {
    std::string method, path;
    HttpHandler handler;
    Run run;
  };
  const RouteEntry* FindRoute(const std::string& method, const std::string& path, bool* path_known) const {
    *path_known = false;
    for (const RouteEntry& r : routes_) {
      // "/v1/responses/*": every path under the prefix (an id after it).
      const bool prefix = r.path.size() > 1 && r.path.back() == '*';
      if (prefix ? path.size() < r.path.size() || path.compare(0, r.path.size() - 1, r.path, 0, r.path.size() - 1) != 0
                 : r.path != path)
        continue;
      *path_known = true;
      // HEAD: a GET route answered inline, its body dropped (Claude Code's HEAD / probe).
      if (r.method == method || (method == "HEAD" && r.method == "GET" && r.run == Run::kInline)) return &r;
    }
    return nullptr;
  }
  std::string ErrorBody(int status, const std::string& message) const { return error_body_(status, message); }

  const HttpLimits limits_;
  const std::function<std::string(int, const std::string&)> error_body_;
  std::vector<RouteEntry> routes_;
  std::function<bool(const HttpRequest&, HttpResponse&)> pre_routing_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  asio::thread_pool workers_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_;
  std::atomic<int> open_{0};
  // I/O thread only:
  bool stopping_ = false;
  uint64_t next_id_ = 0;
  std::unordered_map<uint64_t, std::weak_ptr<Connection>> connections_;
};

// One client connection, driven on the I/O thread (see the header for its phases).
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer::Impl& server, tcp::socket socket, uint64_t id)
      : s_(server),
        stream_(std::move(socket)),
        buffer_(server.limits_.max_header_bytes + (64 << 10)),
        deadline_(server.io_),
        watch_timer_(server.io_),
        id_(id) {}

  void Start() { WaitForRequest(s_.limits_.header_timeout_s); }

  // Stop(): idle connections and half-read heads close now; the others after their response.
  void OnServerStop() {
    keep_alive_ = false;
    if (state_ == State::kIdle || state_ == State::kHead) Close();
  }

  bool closed() const { return closed_.load(); }

  // Streaming writes, posted from a worker (I/O thread).
  void WriteChunk(std::shared_ptr<std::string> frame, std::function<void(bool)> done) {
    if (closed_ || gone_->load()) return done(false);
    stream_.expires_after(Seconds(s_.limits_.write_timeout_s));
    asio::async_write(stream_, asio::buffer(*frame), [self = shared_from_this(), frame, done](beast::error_code ec, size_t) {
      if (ec) self->gone_->store(true);
      done(!ec);
    });
  }
  // After a stream: the last chunk, or an abort when the client is gone (I/O thread).
  void FinishStream(bool head_sent, bool ok, const HttpResponse& res) {
    StopWatch();
    if (closed_) return;
    if (!ok || gone_->load()) return Close();
    const bool close = !keep_alive_ || s_.stopping_;
    out_ = head_sent ? "0\r\n\r\n" : Head(res, close, std::nullopt) + "0\r\n\r\n";
    WriteOut(close);
  }
  bool KeepAliveAtHead() const { return keep_alive_ && !s_.stopping_; }

 private:
  enum class State { kIdle, kHead, kBody, kHandler, kWriting, kClosing };

  void WaitForRequest(double timeout_s) {
    state_ = State::kIdle;
    if (s_.stopping_) return Close();
    if (buffer_.size() > 0) return ReadHead();  // a pipelined request is already here
    stream_.expires_after(Seconds(timeout_s));
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (ec) return self->Close();
      self->buffer_.commit(n);
      self->ReadHead();
    });
  }

  void ReadHead() {
    state_ = State::kHead;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(s_.limits_.max_header_bytes));
    parser_->body_limit(s_.limits_.max_body_bytes);
    ArmDeadline(s_.limits_.header_timeout_s);
    bhttp::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->DisarmDeadline();
      self->OnHead(ec);
    });
  }

  // The head is in: refuse what must not be read further, else read the body.
  void OnHead(beast::error_code ec) {
    if (ec) return OnReadError(ec, "head", s_.limits_.header_timeout_s);
    const auto& h = parser_->get();
    if (auto refusal = RefuseHead(h)) return Refuse(refusal->status, refusal->message);
    if (h.find(bhttp::field::expect) != h.end()) {  // 100-continue (RefuseHead refused the others)
      if (!parser_->is_done()) {  // curl waits for this before sending a large body
        out_ = "HTTP/1.1 100 Continue\r\n\r\n";
        stream_.expires_after(Seconds(s_.limits_.write_timeout_s));
        asio::async_write(stream_, asio::buffer(out_), [self = shared_from_this()](beast::error_code ec, size_t) {
          if (ec) return self->Close();
          self->ReadBody();
        });
        return;
      }
    }
    ReadBody();
  }

  void ReadBody() {
    state_ = State::kBody;
    if (parser_->is_done()) return OnRequest();
    ArmDeadline(s_.limits_.body_timeout_s);
    bhttp::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->DisarmDeadline();
      if (ec) return self->OnReadError(ec, "body", self->s_.limits_.body_timeout_s);
      self->OnRequest();
    });
  }

  void OnReadError(beast::error_code ec, const char* part, double timeout_s) {
    const auto refusal = ReadErrorRefusal(ec, timed_out_, part, timeout_s, s_.limits_.max_header_bytes, s_.limits_.max_body_bytes);
    if (!refusal) return Close();
    Refuse(refusal->status, refusal->message);
  }

  // An error answer, then the connection closes (what follows it on the wire is not trusted).
  void Refuse(int status, const std::string& message) {
    HttpResponse res;
    res.status = status;
    res.body = s_.ErrorBody(status, message);
    res.close = true;
    WriteResponse(std::move(res));
  }

  void OnRequest() {
    auto message = parser_->release();
    parser_.reset();
    HttpRequest req;
    req.method = std::string(SV(message.method_string()));
    req.target = std::string(SV(message.target()));
    req.path = req.target.substr(0, req.target.find('?'));
    for (const auto& f : message) req.headers.emplace_back(std::string(SV(f.name_string())), std::string(SV(f.value())));
    req.body = std::move(message.body());
    keep_alive_ = message.keep_alive() && !s_.stopping_;
    gone_ = std::make_shared<std::atomic<bool>>(false);
    req.gone = gone_;
    HttpResponse res;
    bool answered = false;
    try {
      answered = s_.pre_routing_ && s_.pre_routing_(req, res);
    } catch (const std::exception& e) {
      return Refuse(500, std::string("internal error: ") + e.what());
    }
    if (answered) return WriteResponse(std::move(res));
    bool path_known = false;
    const HttpServer::Impl::RouteEntry* route = s_.FindRoute(req.method, req.path, &path_known);
    if (!route) {
      res.status = path_known ? 405 : 404;
      res.body = s_.ErrorBody(res.status, path_known ? "method " + req.method + " not allowed on " + req.path : "no such route");
      return WriteResponse(std::move(res));
    }
    if (route->run == HttpServer::Run::kInline) {
      RunHandler(route->handler, req, res);
      if (req.method == "HEAD") res.body.clear();
      return WriteResponse(std::move(res));
    }
    state_ = State::kHandler;
    StartWatch();
    asio::post(s_.workers_, [self = shared_from_this(), handler = route->handler, req = std::move(req)]() mutable {
      HttpResponse res;
      self->RunHandler(handler, req, res);
      ReleaseLargeBody(req);
      if (res.stream) return RunStream(std::move(self), std::move(res));
      auto& io = self->s_.io_;
      asio::post(io, [self = std::move(self), res = std::move(res)]() mutable { self->WriteResponse(std::move(res)); });
    });
  }

  void RunHandler(const HttpHandler& handler, const HttpRequest& req, HttpResponse& res) {
    try {
      handler(req, res);
    } catch (const std::exception& e) {
      res = HttpResponse{};
      res.status = 500;
      res.body = s_.ErrorBody(500, e.what());
    }
  }

  // On a worker: runs the stream function with a sink whose writes go through the I/O thread.
  static void RunStream(std::shared_ptr<Connection> self, HttpResponse res);

  // The head and body deadlines are a timer of their own rather than the stream's: the stream's
  // closes the socket when it fires, and then the 408 could not be written. This one cancels
  // the read, whose handler then answers 408 (OnReadError).
  void ArmDeadline(double timeout_s) {
    stream_.expires_never();
    timed_out_ = false;
    const uint64_t gen = ++deadline_gen_;
    deadline_.expires_after(Seconds(timeout_s));
    deadline_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
      if (ec || gen != self->deadline_gen_ || self->closed_) return;
      self->timed_out_ = true;
      beast::error_code ignored;
      self->stream_.socket().cancel(ignored);
    });
  }
  void DisarmDeadline() {
    ++deadline_gen_;
    deadline_.cancel();
  }

  // While a handler runs the socket is watched for the client's close: POLLRDHUP tells it even
  // when bytes of a pipelined request (or one stray byte) arrived first, which are read into the
  // buffer for later (up to its limit, then the watch polls on a timer).
  void StartWatch() {
    const uint64_t gen = ++watch_gen_;
    watching_ = true;
    if (PeerClosed()) return MarkGone();
    if (buffer_.size() >= buffer_.max_size()) return PollWatch(gen);
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), gen](beast::error_code ec) {
      if (gen != self->watch_gen_ || !self->watching_ || ec == asio::error::operation_aborted) return;
      if (ec || self->PeerClosed()) return self->MarkGone();
      // Bytes of a later request: keep them and watch on.
      const size_t room = std::min<size_t>(16384, self->buffer_.max_size() - self->buffer_.size());
      const auto into = self->buffer_.prepare(room);
      const ssize_t r = ::recv(self->stream_.socket().native_handle(), into.data(), into.size(), MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return self->MarkGone();
      if (r > 0) self->buffer_.commit(static_cast<size_t>(r));
      self->StartWatch();
    });
  }
  // The buffer is full of unread request bytes: readability says nothing more, so poll.
  void PollWatch(uint64_t gen) {
    watch_timer_.expires_after(std::chrono::milliseconds(100));
    watch_timer_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
      if (ec || gen != self->watch_gen_ || !self->watching_) return;
      if (self->PeerClosed()) return self->MarkGone();
      self->PollWatch(gen);
    });
  }
  // The client shut its side (FIN, whatever unread bytes precede it) or reset the connection.
  bool PeerClosed() {
    pollfd p{stream_.socket().native_handle(), POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  }
  void MarkGone() {
    watching_ = false;
    gone_->store(true);
    keep_alive_ = false;
  }
  void StopWatch() {
    if (!watching_) return;
    watching_ = false;
    ++watch_gen_;
    watch_timer_.cancel();
    beast::error_code ec;
    stream_.socket().cancel(ec);
  }

  void WriteResponse(HttpResponse res) {
    StopWatch();
    if (closed_) return;
    if (gone_ && gone_->load()) return Close();  // nobody to answer
    const bool close = res.close || !keep_alive_ || s_.stopping_;
    out_ = Head(res, close, res.body.size()) + res.body;
    WriteOut(close);
  }

  void WriteOut(bool close) {
    state_ = State::kWriting;
    stream_.expires_after(Seconds(s_.limits_.write_timeout_s));
    asio::async_write(stream_, asio::buffer(out_), [self = shared_from_this(), close](beast::error_code ec, size_t) {
      self->out_.clear();
      if (ec) return self->Close();
      if (close) return self->LingeringClose();
      self->WaitForRequest(self->s_.limits_.keep_alive_timeout_s);
    });
  }

  // Closes our side for writing, then discards what the client still sends for a moment, so
  // its kernel does not answer unread bytes with a reset that would destroy our response.
  void LingeringClose() {
    state_ = State::kClosing;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return Close();
    stream_.expires_after(std::chrono::seconds(2));
    Discard();
  }
  void Discard() {
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(16384), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Close();
      self->Discard();
    });
  }

  void Close() {
    if (closed_.exchange(true)) return;
    state_ = State::kClosing;
    watching_ = false;
    DisarmDeadline();
    watch_timer_.cancel();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    if (gone_) gone_->store(true);
    s_.Forget(id_);
  }

  HttpServer::Impl& s_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  asio::steady_timer deadline_;     // head and body (ArmDeadline)
  asio::steady_timer watch_timer_;  // PollWatch
  uint64_t deadline_gen_ = 0;
  bool timed_out_ = false;
  std::shared_ptr<std::atomic<bool>> gone_ = std::make_shared<std::atomic<bool>>(false);
  std::string out_;
  State state_ = State::kIdle;
  bool keep_alive_ = true;
  bool watching_ = false;
  uint64_t watch_gen_ = 0;
  std::atomic<bool> closed_{false};
  const uint64_t id_;
};

namespace {

// The sink a streaming handler writes to: each write is posted to the I/O thread and waited
// for, so a stream proceeds at the client's pace and stops when the client goes.
class ConnectionSink final : public StreamSink {
 public:
  ConnectionSink(std::shared_ptr<Connection> conn, asio::io_context& io, const HttpResponse& res, bool keep_alive)
      : conn_(std::move(conn)), io_(io), head_(Head(res, !keep_alive, std::nullopt)) {}

  bool Write(std::string_view data) override {
    if (failed_ || conn_->closed()) return false;
    if (data.empty()) return true;  // a zero-size chunk would end the body
    auto frame = std::make_shared<std::string>(head_sent_ ? "" : head_);
    frame->append(ChunkFrame(data));
    head_sent_ = true;
    auto result = std::make_shared<std::promise<bool>>();
    std::future<bool> written = result->get_future();
    asio::post(io_, [conn = conn_, frame, result] { conn->WriteChunk(frame, [result](bool ok) { result->set_value(ok); }); });
    // The I/O thread answers every posted write unless it has stopped with the connection
    // closed: so poll the closed flag rather than wait forever.
    while (written.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready)
      if (conn_->closed()) return !(failed_ = true);
    if (!written.get()) failed_ = true;
    return !failed_;
  }
  bool Gone() const override { return failed_ || conn_->closed(); }
  bool head_sent() const { return head_sent_; }
  bool failed() const { return failed_; }

 private:
  std::shared_ptr<Connection> conn_;
  asio::io_context& io_;
  const std::string head_;
  bool head_sent_ = false, failed_ = false;
};

}  // namespace

void Connection::RunStream(std::shared_ptr<Connection> self, HttpResponse res) {
  auto& io = self->s_.io_;
  bool head_sent = false, ok = false;
  {  // the sink's reference to the connection ends here, on this thread, before the post
    ConnectionSink sink(self, io, res, self->KeepAliveAtHead());
    try {
      res.stream(sink);
      ok = !sink.failed();
    } catch (const std::exception&) {
    }
    head_sent = sink.head_sent();
  }
  res.stream = nullptr;  // releases what the stream held (its request's slot) before the last write
  asio::post(io, [self = std::move(self), head_sent, ok, res = std::move(res)] { self->FinishStream(head_sent, ok, res); });
}

void HttpServer::Impl::DoAccept() {
  acceptor_.async_accept(io_, [this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor_.is_open()) return;
    if (ec) {  // out of descriptors, most likely: retry shortly rather than spin
      auto timer = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(50));
      timer->async_wait([this, timer](beast::error_code) { DoAccept(); });
      return;
    }
    if (open_.load() >= limits_.max_connections) {
      // Busy: a short answer written without blocking, then close.
      HttpResponse res;
      res.status = 503;
      res.body = ErrorBody(503, "too many connections (" + std::to_string(limits_.max_connections) + "); retry later");
      res.headers.emplace_back("Retry-After", "1");
      const std::string out = Head(res, true, res.body.size()) + res.body;
      [[maybe_unused]] const ssize_t sent = ::send(socket.native_handle(), out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      beast::error_code ignored;
      socket.shutdown(tcp::socket::shutdown_both, ignored);
      socket.close(ignored);
    } else {
      const uint64_t id = next_id_++;
      auto conn = std::make_shared<Connection>(*this, std::move(socket), id);
      connections_.emplace(id, conn);
      ++open_;
      conn->Start();
    }
    DoAccept();
  });
}

void HttpServer::Impl::Forget(uint64_t id) {
  connections_.erase(id);
  --open_;
  if (stopping_ && connections_.empty()) guard_.reset();
}

void HttpServer::Impl::StopOnIo() {
  if (stopping_) return;
  stopping_ = true;
  beast::error_code ec;
  acceptor_.close(ec);
  std::vector<std::shared_ptr<Connection>> live;
  for (auto& [id, weak] : connections_)
    if (auto c = weak.lock()) live.push_back(std::move(c));
  for (auto& c : live) c->OnServerStop();
  if (connections_.empty()) guard_.reset();
}

HttpServer::HttpServer(HttpLimits limits, std::function<std::string(int, const std::string&)> error_body)
    : impl_(std::make_unique<Impl>(limits, std::move(error_body))) {}

HttpServer::~HttpServer() {
  Stop();
  impl_->workers_.join();
}

void HttpServer::Route(std::string method, std::string path, HttpHandler handler, Run run) {
  impl_->routes_.push_back({std::move(method), std::move(path), std::move(handler), run});
}

void HttpServer::SetPreRouting(std::function<bool(const HttpRequest&, HttpResponse&)> hook) { impl_->pre_routing_ = std::move(hook); }

core::StatusOr<int> HttpServer::Bind(const std::string& host, int port) {
  // Each connection holds a descriptor: make room for --max-connections of them.
  rlimit lim{};
  const rlim_t want = static_cast<rlim_t>(impl_->limits_.max_connections) + 256;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < want) {
    lim.rlim_cur = std::min(want, lim.rlim_max);
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  const std::string where = host + ":" + std::to_string(port);
  beast::error_code ec;
  tcp::resolver resolver(impl_->io_);
  const auto endpoints = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || endpoints.empty()) return core::IoError("cannot resolve " + where + ": " + ec.message());
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  tcp::acceptor& a = impl_->acceptor_;
  a.open(endpoint.protocol(), ec);
  // SO_REUSEADDR only (a restart may rebind while old connections linger); no SO_REUSEPORT,
  // which would let a second server share the port and the kernel split traffic between them.
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(std::max(128, impl_->limits_.max_connections), ec);
  if (ec) {
    beast::error_code ignored;
    a.close(ignored);
    return core::IoError("cannot listen on " + where + " (in use by another process, or not an address of this machine: " +
                         ec.message() + ")");
  }
  return static_cast<int>(a.local_endpoint().port());
}

void HttpServer::Serve() {
  impl_->guard_.emplace(impl_->io_.get_executor());
  asio::post(impl_->io_, [this] {
    if (impl_->acceptor_.is_open()) impl_->DoAccept();
  });
  // Handlers on the I/O thread catch what they can foresee; whatever else one throws must not
  // end the server: Asio lets run() be called again after a handler threw.
  for (;;) {
    try {
      impl_->io_.run();
      break;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "radixlm serve: an I/O handler failed (%s); serving on\n", e.what());
    }
  }
  impl_->workers_.join();  // handlers of connections that closed under them
}

void HttpServer::Stop() {
  asio::post(impl_->io_, [this] { impl_->StopOnIo(); });
}

}  // namespace radixlm::serve
