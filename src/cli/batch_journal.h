// What makes `radixlm batch` resumable: each worker (process or MPI rank) appends every
// finished output line to its own part file, <output>.part.<rank>, whose first line names the
// job (the input's digest and the job's creation time). Each line goes out in one write(2), so
// a killed job leaves at most a partial last line, which the next run drops. A rerun with the
// same arguments reads every part (any worker count), skips the lines already answered,
// and appends; when all are answered, the output is written in input order (to a temporary
// file, renamed into place) and the parts removed. A completed job's output stays as written.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace radixlm::cli {

// The job's identity as the parts record it.
struct BatchJobId {
  std::string input_digest;  // of the input file's bytes
  int64_t created = 0;       // the responses' "created": the first run's, kept by every rerun
};

// The parts of `output` so far: input line index (the output line's "batch_req_<index>" id) ->
// its output line (without newline). A part of another job (another digest) is an error naming
// it; *job takes the recorded creation time (unchanged when there are no parts).
core::StatusOr<std::map<int64_t, std::string>> ReadBatchParts(const std::string& output, BatchJobId* job);

// True when `output` has part files (a job in progress).
bool HasBatchParts(const std::string& output);

class BatchPart {
 public:
  // Opens (creating with the header, or after checking it) <output>.part.<rank> for appending,
  // dropping a partial last line.
  static core::StatusOr<std::unique_ptr<BatchPart>> Open(const std::string& output, int rank, const BatchJobId& job);
  ~BatchPart();
  // One output line, appended in one write.
  core::Status Append(const std::string& line);

 private:
  explicit BatchPart(int fd) : fd_(fd) {}
  int fd_;
};

// Writes `lines` (input order) to `output` through a temporary file and a rename, then removes
// the parts.
core::Status FinishBatchOutput(const std::string& output, const std::vector<std::string>& lines);

// FNV-1a 64 of the bytes, as 16 hex digits.
std::string Digest(const std::string& bytes);

}  // namespace radixlm::cli
