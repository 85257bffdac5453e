#include "cli/batch_journal.h"

#include "core/json_text.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <sstream>

namespace radixlm::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string HeaderLine(const BatchJobId& job) {
  return core::JsonText(json({{"radixlm_batch_part", 1}, {"input_digest", job.input_digest}, {"created", job.created}}));
}

core::Status IoError(const std::string& what) {
  return core::Status(core::StatusCode::kIoError, what + ": " + std::strerror(errno));
}

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

}  // namespace

std::string Digest(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

bool HasBatchParts(const std::string& output) { return !PartFiles(output).empty(); }

core::StatusOr<std::map<int64_t, std::string>> ReadBatchParts(const std::string& output, BatchJobId* job) {
  std::map<int64_t, std::string> done;
  for (const fs::path& part : PartFiles(output)) {
    std::ifstream in(part, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string all = ss.str();
    size_t pos = 0, line_no = 0;
    while (pos < all.size()) {
      const size_t nl = all.find('\n', pos);
      if (nl == std::string::npos) break;  // a partial last line: the write a kill cut short
      const std::string line = all.substr(pos, nl - pos);
      pos = nl + 1;
      const json j = json::parse(line, nullptr, false);
      if (line_no++ == 0) {
        if (j.is_discarded() || !j.contains("radixlm_batch_part") || !j.contains("input_digest") || !j.contains("created"))
          return core::Status(core::StatusCode::kInvalidArgument, part.string() + " is not a radixlm batch part; remove it");
        if (j["input_digest"] != job->input_digest)
          return core::Status(core::StatusCode::kInvalidArgument,
                              part.string() + " belongs to a job with another input; remove it or choose another --output");
        job->created = j["created"].get<int64_t>();
        continue;
      }
      const std::string id = j.is_object() && j.contains("id") && j["id"].is_string() ? j["id"].get<std::string>() : "";
      if (id.rfind("batch_req_", 0) != 0)
        return core::Status(core::StatusCode::kInvalidArgument, part.string() + ": line " + std::to_string(line_no) + " is damaged");
      done.emplace(std::stoll(id.substr(10)), line);
    }
  }
  return done;
}

core::StatusOr<std::unique_ptr<BatchPart>> BatchPart::Open(const std::string& output, int rank, const BatchJobId& job) {
  const std::string path = output + ".part." + std::to_string(rank);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot open " + path);
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
  auto part = std::unique_ptr<BatchPart>(new BatchPart(fd));
  if (::lseek(fd, 0, SEEK_END) == 0) {
    if (auto st = part->Append(HeaderLine(job)); !st.ok()) return st;
  }
  return part;
}

BatchPart::~BatchPart() {
  ::fsync(fd_);
  ::close(fd_);
}

core::Status BatchPart::Append(const std::string& line) {
  const std::string data = line + "\n";
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

core::Status FinishBatchOutput(const std::string& output, const std::vector<std::string>& lines) {
  const std::string tmp = output + ".tmp";
  {
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return IoError("cannot write " + tmp);
    std::string all;
    for (const std::string& l : lines) {
      all += l;
      all += '\n';
    }
    size_t off = 0;
    while (off < all.size()) {
      const ssize_t n = ::write(fd, all.data() + off, all.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        ::close(fd);
        return IoError("cannot write " + tmp);
      }
      off += static_cast<size_t>(n);
    }
    ::fsync(fd);
    ::close(fd);
  }
  if (std::rename(tmp.c_str(), output.c_str()) != 0) return IoError("cannot rename " + tmp + " to " + output);
  for (const fs::path& part : PartFiles(output)) {
    std::error_code ec;
    fs::remove(part, ec);
  }
  return core::Status::Ok();
}

}  // namespace radixlm::cli
