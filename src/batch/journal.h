// What makes `radixlm batch` resumable, and its output trustworthy on a rerun.
//
// Parts: each worker (process or MPI rank) appends every finished output line to its own part
// file, <output>.part.<rank>. Its first line names the job: {"radixlm_batch_part": 2,
// "input_digest" (SHA-256 of the input's bytes), "lines" (the input's), "created"}. Every other
// line is a record {"i": input line index, "check", "line": the output line's JSON text}, where
// check = the first 16 hex digits of SHA-256(input_digest "\n" i "\n" line): a record of another
// job, an edited or truncated one, a duplicate, or one whose output names another custom_id
// than input line i is refused with its file and line; a line answered twice keeps its first
// record. Each record goes out in one write(2), so a killed job leaves at most a partial last
// line, which the next run drops. A part is locked (flock) by the process appending to it, so a
// second run on the same output stops with an error before it writes anything.
//
// Finish: when every line is answered, rank 0 writes the output in input order and its
// journal, <output>.journal = {"radixlm_batch": 2, "input_digest", "lines", "created",
// "output_sha256"}, each through a temporary file and a rename (output first), then removes the
// parts. A rerun with no parts trusts an existing output only when the journal names this input
// and every output line checks out (ids batch_req_0..N-1 in order, each line's custom_id the
// input's, the bytes' SHA-256 the journal's); anything else is an error naming what differs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace radixlm::batch {

// The job's identity as the parts and the journal record it.
struct BatchJobId {
  std::string input_digest;  // SHA-256 of the input file's bytes, hex
  int64_t created = 0;       // the responses' "created": the first run's, kept by every rerun
  // Per input line, the custom_id its output line carries ("" when the line has none).
  std::vector<std::string> custom_ids;
  int64_t lines() const { return static_cast<int64_t>(custom_ids.size()); }
};

// The records of `output`'s parts so far: input line index -> its output line (without
// newline). A part of another job, or a record that fails its checks, is an error naming the
// file and line; *job takes the recorded creation time (unchanged when there are no parts).
core::StatusOr<std::map<int64_t, std::string>> ReadBatchParts(const std::string& output, BatchJobId* job);

// True when `output` has part files (a job in progress).
bool HasBatchParts(const std::string& output);

// For a rerun without parts: Ok when `output` is this job's finished output (see the header);
// otherwise an error saying why it cannot be trusted (no journal, another input, line N
// differs, bytes changed).
core::Status CheckFinishedOutput(const std::string& output, const BatchJobId& job);

class BatchPart {
 public:
  // Opens (creating with the header, or after checking it) <output>.part.<rank> for appending,
  // dropping a partial last line.
  static core::StatusOr<std::unique_ptr<BatchPart>> Open(const std::string& output, int rank, const BatchJobId& job);
  ~BatchPart();
  // The output line of input line `index`, appended as one record in one write.
  core::Status Append(int64_t index, const std::string& line);

 private:
  BatchPart(int fd, std::string digest) : fd_(fd), digest_(std::move(digest)) {}
  int fd_;
  std::string digest_;
};

// Writes `lines` (input order) to `output` and its journal, each through a temporary file and a
// rename, then removes the parts.
core::Status FinishBatchOutput(const std::string& output, const std::vector<std::string>& lines, const BatchJobId& job);

// Where a run of the job starts. `finished`: `output` is already this job's finished output,
// checked (CheckFinishedOutput); else `done` holds the lines earlier runs answered (the parts'
// records, ReadBatchParts; *job takes their creation time). Any other state of the files is an
// error naming it.
struct Resume {
  bool finished = false;
  std::map<int64_t, std::string> done;
};
core::StatusOr<Resume> ResumeJob(const std::string& output, BatchJobId* job);

// Once every rank has closed its part: when the parts answer every line of the job, writes the
// output and its journal (FinishBatchOutput); otherwise an error saying how many lines wait.
core::Status MergeParts(const std::string& output, const BatchJobId& job);

// SHA-256 of the bytes, as 64 hex digits.
std::string Sha256Hex(const std::string& bytes);

}  // namespace radixlm::batch
