// Request traces for the cache simulator.
//
// Two on-disk schemas, both JSONL with one request per line in arrival order:
//  - Marconi's: {session_id, turn_id, ts, num_input_tokens, num_output_tokens, input_tokens,
//    output_tokens}; input_tokens is the whole conversation history plus the new turn.
//  - Mooncake's: {timestamp (ms), input_length, output_length, hash_ids}; one hash id per
//    512-token block, equal ids meaning equal prefix blocks ("block-hash mode"). Each block is
//    expanded to block_tokens synthetic token ids (hash * block_tokens + offset; the last block
//    holds the remainder), and outputs get ids no input uses, so the radix tree sees exactly
//    the sharing the hashes describe.
// TraceReader streams: a 6 GB trace never has to fit in memory. Format is detected from the
// first line. Bounded per line: a line longer than TraceLimits::max_line_bytes (an endless one,
// from /dev/zero) is an error, not an allocation until memory runs out; a read error is an error,
// not an end; outputs longer than max_output_tokens are refused, because the simulator replays
// an output one decode step per token (2^24 of them took 15 s of one line).
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace radixlm::sim {

struct TraceRequest {
  int64_t session_id = 0;
  int64_t turn_id = 0;
  double ts = 0;  // seconds
  std::vector<int32_t> input;
  std::vector<int32_t> output;
};

enum class TraceFormat { kAuto, kMarconi, kMooncake };

struct TraceLimits {
  int64_t max_line_bytes = int64_t{256} << 20;
  int64_t max_output_tokens = 65536;
};

class TraceReader {
 public:
  static core::StatusOr<TraceReader> Open(const std::string& path, TraceFormat format = TraceFormat::kAuto,
                                          int mooncake_block_tokens = 512, TraceLimits limits = {});
  // Reads the next request into *out; returns false at the end of the file. Errors name the
  // line. A request arriving before the previous one is an error (traces are in arrival order).
  core::StatusOr<bool> Next(TraceRequest* out);
  TraceFormat format() const { return format_; }

 private:
  TraceReader() = default;
  core::Status ParseMarconi(const std::string& line, TraceRequest* out);
  core::Status ParseMooncake(const std::string& line, TraceRequest* out);
  // The next line into *line (without its newline); false at the end of the stream.
  core::StatusOr<bool> ReadLine(std::string* line);
  core::Status LineError(const std::string& what) const;

  std::string path_;
  std::unique_ptr<std::ifstream> in_;
  TraceFormat format_ = TraceFormat::kAuto;
  int block_tokens_ = 512;
  TraceLimits limits_;
  int64_t line_no_ = 0;
  std::string pending_;          // the first non-blank line, read to detect the format
  int64_t pending_line_no_ = 0;  // its line number; 0 when none is pending
  int64_t mooncake_index_ = 0;
  int32_t next_output_id_ = 0;
  double last_ts_ = -1e300;
};

// Writes one request in Marconi's schema (the generator's output format).
void WriteMarconiLine(std::ostream& out, const TraceRequest& request);

}  // namespace radixlm::sim
