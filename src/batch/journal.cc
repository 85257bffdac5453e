#include "batch/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/json_text.h"

namespace radixlm::batch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kFormat = 2;

std::string HeaderLine(const BatchJobId& job) {
  return core::JsonText(json({{"radixlm_batch_part", kFormat}, {"input_digest", job.input_digest}, {"lines", job.lines()},
                              {"created", job.created}}));
}

std::string Check(const std::string& digest, int64_t index, const std::string& line) {
  return Sha256Hex(digest + "\n" + std::to_string(index) + "\n" + line).substr(0, 16);
}

core::Status IoError(const std::string& what) {
  return core::Status(core::StatusCode::kIoError, what + ": " + std::strerror(errno));
}

core::Status Bad(const std::string& where, const std::string& what) { return core::InvalidArgument(where + ": " + what); }

std::string PartPrefix(const std::string& output) { return fs::path(output).filename().string() + ".part."; }

std::vector<fs::path> PartFiles(const std::string& output) {
  std::vector<fs::path> parts;
  const fs::path dir = fs::path(output).parent_path().empty() ? fs::path(".") : fs::path(output).parent_path();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().filename().string().rfind(PartPrefix(output), 0) == 0) parts.push_back(e.path());
  std::sort(parts.begin(), parts.end());
  return parts;
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The output line of input line `index` must be an object with id batch_req_<index> and the
// input line's custom_id; "" when it is, else what is wrong.
std::string LineProblem(const std::string& line, int64_t index, const BatchJobId& job) {
  const json j = json::parse(line, nullptr, false);
  if (!j.is_object()) return "not a JSON object";
  const std::string want_id = "batch_req_" + std::to_string(index);
  if (!j.contains("id") || j["id"] != want_id) return "its id is not " + want_id;
  const std::string& want = job.custom_ids[static_cast<size_t>(index)];
  const bool matches = want.empty() ? (!j.contains("custom_id") || j["custom_id"].is_null()) : (j.contains("custom_id") && j["custom_id"] == want);
  if (!matches) return "its custom_id is not input line " + std::to_string(index + 1) + "'s";
  return "";
}

// Writes `data` to `path` through path.tmp, fsync and a rename.
core::Status WriteAtomically(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot write " + tmp);
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return IoError("cannot write " + tmp);
    }
    off += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return IoError("cannot rename " + tmp + " to " + path);
  return core::Status::Ok();
}

}  // namespace

std::string Sha256Hex(const std::string& bytes) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), d);
  std::string hex(2 * SHA256_DIGEST_LENGTH, '0');
  for (int i = 0; i < SHA256_DIGEST_LENGTH; ++i) std::snprintf(&hex[2 * i], 3, "%02x", d[i]);
  return hex;
}

bool HasBatchParts(const std::string& output) { return !PartFiles(output).empty(); }

core::StatusOr<std::map<int64_t, std::string>> ReadBatchParts(const std::string& output, BatchJobId* job) {
  std::map<int64_t, std::string> done;
  std::map<int64_t, std::string> where_done;
  for (const fs::path& part : PartFiles(output)) {
    const std::string all = ReadAll(part);
    size_t pos = 0, line_no = 0;
    while (pos < all.size()) {
      const size_t nl = all.find('\n', pos);
      if (nl == std::string::npos) break;  // a partial last line: the write a kill cut short
      const std::string text = all.substr(pos, nl - pos);
      pos = nl + 1;
      const std::string where = part.string() + ":" + std::to_string(++line_no);
      const json j = json::parse(text, nullptr, false);
      if (line_no == 1) {
        if (!j.is_object() || !j.contains("radixlm_batch_part") || !j.contains("input_digest") || !j.contains("created") ||
            !j["created"].is_number_integer())
          return Bad(part.string(), "not a radixlm batch part; remove it");
        if (j["radixlm_batch_part"] != kFormat)
          return Bad(part.string(), "a part of another radixlm version's format; remove it to recompute its lines");
        if (j["input_digest"] != job->input_digest || !j.contains("lines") || j["lines"] != job->lines())
          return Bad(part.string(), "belongs to a job with another input; remove it or choose another --output");
        job->created = j["created"].get<int64_t>();
        continue;
      }
      if (!j.is_object() || !j.contains("i") || !j["i"].is_number_integer() || !j.contains("check") || !j["check"].is_string() ||
          !j.contains("line") || !j["line"].is_string())
        return Bad(where, "not a batch record (damaged); remove the part to recompute its lines");
      const int64_t index = j["i"].get<int64_t>();
      const std::string line = j["line"].get<std::string>();
      if (index < 0 || index >= job->lines()) return Bad(where, "names input line " + std::to_string(index + 1) + ", which this input does not have");
      if (j["check"] != Check(job->input_digest, index, line))
        return Bad(where, "fails its check (edited, or another job's); remove the part to recompute its lines");
      if (const std::string problem = LineProblem(line, index, *job); !problem.empty())
        return Bad(where, "the output of input line " + std::to_string(index + 1) + " is wrong: " + problem);
      // A line answered twice (a run killed between its append and the next run's read, or a
      // part copied): both records passed their checks, so either is this job's answer; the
      // first is kept.
      if (auto [it, fresh] = done.emplace(index, line); fresh) where_done[index] = where;
    }
  }
  return done;
}

core::Status CheckFinishedOutput(const std::string& output, const BatchJobId& job) {
  const std::string journal_path = output + ".journal";
  const std::string why = "; remove it or choose another --output";
  if (!fs::exists(journal_path))
    return Bad(output, "exists but is not a finished job's output (no " + journal_path + ")" + why);
  const json journal = json::parse(ReadAll(journal_path), nullptr, false);
  if (!journal.is_object() || journal.value("radixlm_batch", 0) != kFormat || !journal.contains("output_sha256"))
    return Bad(journal_path, "not a radixlm batch journal" + why);
  if (journal.value("input_digest", "") != job.input_digest || journal.value("lines", int64_t{-1}) != job.lines())
    return Bad(output, "is the output of another input (" + journal_path + ")" + why);
  const std::string bytes = ReadAll(output);
  int64_t index = 0;
  for (size_t pos = 0; pos < bytes.size(); ++index) {
    const size_t nl = bytes.find('\n', pos);
    const std::string where = output + ":" + std::to_string(index + 1);
    if (nl == std::string::npos) return Bad(where, "a partial last line" + why);
    if (index >= job.lines()) return Bad(where, "a line past the input's " + std::to_string(job.lines()) + why);
    if (const std::string problem = LineProblem(bytes.substr(pos, nl - pos), index, job); !problem.empty())
      return Bad(where, problem + why);
    pos = nl + 1;
  }
  if (index < job.lines()) return Bad(output, "answers " + std::to_string(index) + " of " + std::to_string(job.lines()) + " lines" + why);
  if (journal["output_sha256"] != Sha256Hex(bytes)) return Bad(output, "was changed after the job finished (its SHA-256 is not the journal's)" + why);
  return core::Status::Ok();
}

core::StatusOr<std::unique_ptr<BatchPart>> BatchPart::Open(const std::string& output, int rank, const BatchJobId& job) {
  const std::string path = output + ".part." + std::to_string(rank);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot open " + path);
  // One writer per part for the job's life: a second `radixlm batch` on the same output stops
  // here, before it truncates or appends anything (the lock goes with the process).
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return IoError(path + " is in use by another radixlm batch on this output; wait for it, or choose another --output");
  }
  // Drop a partial last line (a kill mid-write) so the next append starts a line.
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size > 0) {
    off_t keep = size;
    char c = 0;
    while (keep > 0) {
      if (::pread(fd, &c, 1, keep - 1) != 1) break;
      if (c == '\n') break;
      --keep;
    }
    if (keep != size && ::ftruncate(fd, keep) != 0) {
      ::close(fd);
      return IoError("cannot truncate " + path);
    }
  }
  auto part = std::unique_ptr<BatchPart>(new BatchPart(fd, job.input_digest));
  if (::lseek(fd, 0, SEEK_END) == 0) {
    const std::string header = HeaderLine(job) + "\n";
    if (::write(fd, header.data(), header.size()) != static_cast<ssize_t>(header.size())) return IoError("cannot write " + path);
  }
  return part;
}

BatchPart::~BatchPart() {
  ::fsync(fd_);
  ::close(fd_);
}

core::Status BatchPart::Append(int64_t index, const std::string& line) {
  const std::string data =
      core::JsonText(json({{"i", index}, {"check", Check(digest_, index, line)}, {"line", line}})) + "\n";
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd_, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("cannot append a batch output line");
    }
    off += static_cast<size_t>(n);
  }
  return core::Status::Ok();
}

core::Status FinishBatchOutput(const std::string& output, const std::vector<std::string>& lines, const BatchJobId& job) {
  std::string all;
  for (const std::string& l : lines) {
    all += l;
    all += '\n';
  }
  RADIXLM_RETURN_IF_ERROR(WriteAtomically(output, all));
  const json journal = {{"radixlm_batch", kFormat}, {"input_digest", job.input_digest}, {"lines", job.lines()},
                        {"created", job.created}, {"output_sha256", Sha256Hex(all)}};
  RADIXLM_RETURN_IF_ERROR(WriteAtomically(output + ".journal", core::JsonText(journal) + "\n"));
  for (const fs::path& part : PartFiles(output)) {
    std::error_code ec;
    fs::remove(part, ec);
  }
  return core::Status::Ok();
}

core::StatusOr<Resume> ResumeJob(const std::string& output, BatchJobId* job) {
  Resume r;
  if (!HasBatchParts(output) && fs::exists(output)) {
    // A finished job leaves only its output and journal: trusted when they check out.
    RADIXLM_RETURN_IF_ERROR(CheckFinishedOutput(output, *job));
    r.finished = true;
    return r;
  }
  auto parts = ReadBatchParts(output, job);
  if (!parts.ok()) return parts.status();
  r.done = std::move(*parts);
  return r;
}

core::Status MergeParts(const std::string& output, const BatchJobId& job) {
  BatchJobId check = job;
  auto all = ReadBatchParts(output, &check);
  if (!all.ok()) return all.status();
  std::vector<std::string> lines;
  int64_t missing = 0;
  for (int64_t i = 0; i < job.lines(); ++i) {
    auto it = all->find(i);
    if (it == all->end()) ++missing;
    else lines.push_back(it->second);
  }
  if (missing > 0)
    return core::Status(core::StatusCode::kInternal,
                        std::to_string(missing) + " lines have no answer yet; rerun the same command to finish them");
  return FinishBatchOutput(output, lines, check);
}

}  // namespace radixlm::batch
