// Publishes the engine's KV cache events in vLLM's wire format (vllm/distributed/kv_events.py),
// which llm-d, NVIDIA Dynamo and SGLang's router already read:
//   ZMQ PUB, one 3-frame message per engine step that changed the cache:
//     [topic, sequence number (8 bytes, big-endian, from 0, one per batch),
//      msgpack [ts (float64 Unix seconds), [event...], data_parallel_rank (0)]]
//   events as msgspec's positional tagged arrays (the form every decoder accepts):
//     ["BlockStored", [key...], parent key | nil, [token id...], block_size, nil, nil, nil]
//     (lora_id, medium, lora_name: nil)
//     ["BlockRemoved", [key...], nil]                      (medium: nil)
//   and, for hybrid models with --kv-events-ssm-checkpoints (radixlm's extension: a hybrid
//   request reuses a prefix only up to an SSM checkpoint, which KV blocks alone do not say):
//     ["SsmCheckpointStored", key, position, last full block's key | nil]
//     ["SsmCheckpointRemoved", key, position]
//   (key: cache/kv_events.h BlockHasher::State; off by default, as a strict decoder may refuse
//   unknown tags).
//   ZMQ ROUTER (replay): a client sends ["", start seq (8 bytes BE)] (a DEALER; a REQ sends the
//   seq alone) and gets, for every batch still buffered with seq >= start, ["", topic, seq,
//   payload], then the end marker ["", topic, FF x 8, ""]. The last `buffer_batches` batches
//   are kept (vLLM's buffer_steps, 10,000).
// Block keys are cache/kv_events.h's (vLLM's sha256_cbor hashes, last 8 bytes as an integer).
// Threading: Publish() only queues (it runs on the engine thread); one thread of its own owns
// both sockets, sends, buffers and answers replays. Sends never block the engine: past ZMQ's
// high-water mark a slow subscriber loses messages (it sees a gap and replays).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"

namespace radixlm::serve {

struct KvEventsConfig {
  std::string endpoint;         // PUB, e.g. tcp://127.0.0.1:5557 (bound)
  std::string replay_endpoint;  // ROUTER; empty: no replay
  std::string topic;            // vLLM's default: ""
  int32_t block_size = 16;      // tokens per block (what the keys are over)
  size_t buffer_batches = 10000;
};

// The replay endpoint when none is given: the events' port + 1 (tcp://HOST:PORT ->
// tcp://HOST:PORT+1, as vLLM's examples pair them); an error for another kind of endpoint.
core::StatusOr<std::string> DefaultReplayEndpoint(const std::string& endpoint);

class KvEventsPublisher {
 public:
  // Binds both sockets now, so that an endpoint in use is an error at start-up.
  static core::StatusOr<std::unique_ptr<KvEventsPublisher>> Start(KvEventsConfig config);
  ~KvEventsPublisher();
  // Queues one step's events (thread-safe; never blocks on the network).
  void Publish(std::vector<engine::KvEvent> events);
  // The msgpack payload of one batch (tests and the replay buffer use the same bytes).
  static std::string EncodeBatch(const std::vector<engine::KvEvent>& events, double ts, int32_t block_size);

 private:
  KvEventsPublisher(KvEventsConfig config, void* context, void* pub, void* router);
  void Run();
  void AnswerReplays();

  const KvEventsConfig config_;
  void* context_;
  void* pub_;
  void* router_;  // null: no replay
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<engine::KvEvent>> queue_;
  bool stop_ = false;
  uint64_t next_seq_ = 0;
  std::deque<std::pair<uint64_t, std::string>> buffer_;  // (seq, payload), oldest first
  std::thread thread_;
};

}  // namespace radixlm::serve
