// A server's graceful shutdown on SIGTERM / SIGINT. The handler only counts signals
// (async-signal-safe); a watcher thread, on the first, stops the server, which drains (no new
// connections; requests in flight finish), and ends the process with status 1 if the drain
// outlasts the timeout. A second signal exits at once (status 130).
#pragma once

#include <atomic>
#include <functional>
#include <thread>

namespace radixlm::serve {

class Drain {
 public:
  // Installs the handlers and starts the watcher; `stop` is called once, on the first signal.
  Drain(std::function<void()> stop, double timeout_s);
  // The server has returned from its listen loop: the watcher ends (nothing left to drain).
  ~Drain();
  Drain(const Drain&) = delete;
  Drain& operator=(const Drain&) = delete;

 private:
  std::atomic<bool> done_{false};
  std::thread watcher_;
};

}  // namespace radixlm::serve
