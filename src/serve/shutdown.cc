#include "serve/shutdown.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace radixlm::serve {
namespace {

std::atomic<int> g_signals{0};
void OnSignal(int) {
  if (g_signals.fetch_add(1) >= 1) std::_Exit(130);
}

}  // namespace

Drain::Drain(std::function<void()> stop, double timeout_s) {
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  watcher_ = std::thread([this, stop = std::move(stop), timeout_s] {
    while (!done_ && g_signals == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (done_) return;
    std::fprintf(stderr, "radixlm: draining (at most %.0f s; a second signal exits now)\n", timeout_s);
    stop();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (!done_ && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (done_) return;
    std::fprintf(stderr, "radixlm: requests still in flight after %.0f s (--shutdown-timeout); exiting\n", timeout_s);
    std::_Exit(1);
  });
}

Drain::~Drain() {
  done_ = true;
  watcher_.join();
}

}  // namespace radixlm::serve
