#include "serve/kv_events_publisher.h"

#include <zmq.h>

#include <chrono>
#include <cstring>
#include <sstream>

#define MSGPACK_NO_BOOST
#include <msgpack.hpp>

namespace radixlm::serve {

core::StatusOr<std::string> DefaultReplayEndpoint(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  int port = 0;
  if (colon == std::string::npos || endpoint.rfind("tcp://", 0) != 0 ||
      !(std::istringstream(endpoint.substr(colon + 1)) >> port) || port <= 0 || port >= 65535)
    return core::InvalidArgument("--kv-events must be tcp://HOST:PORT, or give --kv-events-replay");
  return endpoint.substr(0, colon + 1) + std::to_string(port + 1);
}
namespace {

std::string SeqBytes(uint64_t seq) {
  std::string b(8, '\0');
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(seq >> (8 * (7 - i)));
  return b;
}

// Sends frames as one multipart message; false when ZMQ would block or failed.
bool SendFrames(void* socket, const std::vector<std::string>& frames, int flags) {
  for (size_t i = 0; i < frames.size(); ++i) {
    const int more = i + 1 < frames.size() ? ZMQ_SNDMORE : 0;
    if (zmq_send(socket, frames[i].data(), frames[i].size(), flags | more) < 0) return false;
  }
  return true;
}

core::Status ZmqError(const std::string& what, const std::string& endpoint) {
  return core::IoError(what + " " + endpoint + ": " + zmq_strerror(zmq_errno()));
}

}  // namespace

std::string KvEventsPublisher::EncodeBatch(const std::vector<engine::KvEvent>& events, double ts, int32_t block_size) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(&buf);
  pk.pack_array(3);
  pk.pack_double(ts);
  pk.pack_array(static_cast<uint32_t>(events.size()));
  for (const engine::KvEvent& e : events) {
    auto keys = [&] {
      pk.pack_array(static_cast<uint32_t>(e.block_keys.size()));
      for (uint64_t k : e.block_keys) pk.pack_uint64(k);
    };
    switch (e.kind) {
      case engine::KvEvent::Kind::kStored:
        pk.pack_array(8);
        pk.pack(std::string("BlockStored"));
        keys();
        if (e.parent_key) pk.pack_uint64(*e.parent_key);
        else pk.pack_nil();
        pk.pack_array(static_cast<uint32_t>(e.token_ids.size()));
        for (int32_t t : e.token_ids) pk.pack_uint32(static_cast<uint32_t>(t));
        pk.pack_int32(block_size);
        pk.pack_nil();  // lora_id
        if (e.medium.empty()) pk.pack_nil();  // the default tier
        else pk.pack(e.medium);
        pk.pack_nil();  // lora_name
        break;
      case engine::KvEvent::Kind::kRemoved:
        pk.pack_array(3);
        pk.pack(std::string("BlockRemoved"));
        keys();
        if (e.medium.empty()) pk.pack_nil();
        else pk.pack(e.medium);
        break;
      case engine::KvEvent::Kind::kAllCleared:
        pk.pack_array(1);
        pk.pack(std::string("AllBlocksCleared"));
        break;
      case engine::KvEvent::Kind::kStateStored:
      case engine::KvEvent::Kind::kStateRemoved: {
        const bool stored = e.kind == engine::KvEvent::Kind::kStateStored;
        pk.pack_array(stored ? 4 : 3);
        pk.pack(std::string(stored ? "SsmCheckpointStored" : "SsmCheckpointRemoved"));
        pk.pack_uint64(e.block_keys.at(0));
        pk.pack_int64(e.position);
        if (stored) {
          if (e.parent_key) pk.pack_uint64(*e.parent_key);
          else pk.pack_nil();
        }
        break;
      }
    }
  }
  pk.pack_int32(0);  // data_parallel_rank
  return std::string(buf.data(), buf.size());
}

core::StatusOr<std::unique_ptr<KvEventsPublisher>> KvEventsPublisher::Start(KvEventsConfig config) {
  void* context = zmq_ctx_new();
  if (!context) return core::IoError("cannot create a ZMQ context");
  void* pub = zmq_socket(context, ZMQ_PUB);
  const int hwm = 100000, linger = 0;
  zmq_setsockopt(pub, ZMQ_SNDHWM, &hwm, sizeof(hwm));
  zmq_setsockopt(pub, ZMQ_LINGER, &linger, sizeof(linger));
  if (zmq_bind(pub, config.endpoint.c_str()) != 0) {
    const core::Status st = ZmqError("cannot bind the KV events endpoint", config.endpoint);
    zmq_close(pub);
    zmq_ctx_term(context);
    return st;
  }
  void* router = nullptr;
  if (!config.replay_endpoint.empty()) {
    router = zmq_socket(context, ZMQ_ROUTER);
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof(linger));
    if (zmq_bind(router, config.replay_endpoint.c_str()) != 0) {
      const core::Status st = ZmqError("cannot bind the KV events replay endpoint", config.replay_endpoint);
      zmq_close(router);
      zmq_close(pub);
      zmq_ctx_term(context);
      return st;
    }
  }
  std::unique_ptr<KvEventsPublisher> p(new KvEventsPublisher(std::move(config), context, pub, router));
  p->thread_ = std::thread([raw = p.get()] { raw->Run(); });  // the sockets move to it here
  return p;
}

KvEventsPublisher::KvEventsPublisher(KvEventsConfig config, void* context, void* pub, void* router)
    : config_(std::move(config)), context_(context), pub_(pub), router_(router) {}

KvEventsPublisher::~KvEventsPublisher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (router_) zmq_close(router_);
  zmq_close(pub_);
  zmq_ctx_term(context_);
}

void KvEventsPublisher::Publish(std::vector<engine::KvEvent> events) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(events));
  }
  cv_.notify_one();
}

void KvEventsPublisher::Run() {
  for (;;) {
    std::deque<std::vector<engine::KvEvent>> batches;
    bool stop;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Short waits: the replay socket is served between batches.
      cv_.wait_for(lock, std::chrono::milliseconds(router_ ? 10 : 200), [&] { return stop_ || !queue_.empty(); });
      batches.swap(queue_);
      stop = stop_;
    }
    for (const auto& events : batches) {
      const double ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      const uint64_t seq = next_seq_++;  // taken even if the send is dropped: a gap shows it
      std::string payload = EncodeBatch(events, ts, config_.block_size);
      SendFrames(pub_, {config_.topic, SeqBytes(seq), payload}, ZMQ_DONTWAIT);
      buffer_.emplace_back(seq, std::move(payload));
      if (buffer_.size() > config_.buffer_batches) buffer_.pop_front();
    }
    if (router_) AnswerReplays();
    if (stop) return;
  }
}

void KvEventsPublisher::AnswerReplays() {
  for (;;) {
    // A request: [identity, "", start seq (8 bytes)].
    std::vector<std::string> frames;
    int more = 1;
    while (more) {
      zmq_msg_t msg;
      zmq_msg_init(&msg);
      if (zmq_msg_recv(&msg, router_, frames.empty() ? ZMQ_DONTWAIT : 0) < 0) {
        zmq_msg_close(&msg);
        return;  // nothing waiting
      }
      frames.emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
      more = zmq_msg_more(&msg);
      zmq_msg_close(&msg);
    }
    if (frames.size() != 3 || !frames[1].empty() || frames[2].size() != 8) continue;  // not a replay request
    uint64_t start = 0;
    for (unsigned char c : frames[2]) start = (start << 8) | c;
    const std::string& identity = frames[0];
    for (const auto& [seq, payload] : buffer_)
      if (seq >= start) SendFrames(router_, {identity, "", config_.topic, SeqBytes(seq), payload}, 0);
    SendFrames(router_, {identity, "", config_.topic, std::string(8, '\xff'), ""}, 0);
  }
}

}  // namespace radixlm::serve
