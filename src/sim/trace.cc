#include "sim/trace.h"

#include <sys/stat.h>

#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <stdexcept>
#include <ostream>

#include <nlohmann/json.hpp>

namespace radixlm::sim {
namespace {

// A flat JSON object scanner for trace lines: keys map to numbers or arrays of integers. Trace
// files run to gigabytes of integer arrays, which a general DOM parser reads ~10x slower; any
// line this scanner does not understand is handed to nlohmann::json instead.
class FlatObjectScanner {
 public:
  explicit FlatObjectScanner(const std::string& s) : s_(s) {}

  // Calls on_number(key, double) and on_array(key, vector) per member. False on anything else.
  template <typename OnNumber, typename OnArray>
  bool Scan(OnNumber on_number, OnArray on_array) {
    SkipSpace();
    if (!Eat('{')) return false;
    SkipSpace();
    if (Eat('}')) return AtEnd();
    for (;;) {
      std::string key;
      if (!ReadString(&key)) return false;
      SkipSpace();
      if (!Eat(':')) return false;
      SkipSpace();
      if (Peek() == '[') {
        ++p_;
        std::vector<int32_t> values;
        SkipSpace();
        if (!Eat(']')) {
          for (;;) {
            SkipSpace();
            int64_t v;
            auto [next, ec] = std::from_chars(s_.data() + p_, s_.data() + s_.size(), v);
            if (ec != std::errc() || v < INT32_MIN || v > INT32_MAX) return false;
            p_ = next - s_.data();
            values.push_back(static_cast<int32_t>(v));
            SkipSpace();
            if (Eat(']')) break;
            if (!Eat(',')) return false;
          }
        }
        on_array(key, std::move(values));
      } else {
        double v;
        auto [next, ec] = std::from_chars(s_.data() + p_, s_.data() + s_.size(), v);
        if (ec != std::errc()) return false;
        p_ = next - s_.data();
        on_number(key, v);
      }
      SkipSpace();
      if (Eat('}')) return AtEnd();
      if (!Eat(',')) return false;
      SkipSpace();
    }
  }

 private:
  char Peek() const { return p_ < s_.size() ? s_[p_] : '\0'; }
  bool Eat(char c) {
    if (Peek() != c) return false;
    ++p_;
    return true;
  }
  void SkipSpace() {
    while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
  }
  bool AtEnd() {
    SkipSpace();
    return p_ == s_.size();
  }
  bool ReadString(std::string* out) {
    if (!Eat('"')) return false;
    const size_t end = s_.find('"', p_);
    if (end == std::string::npos || s_.find('\\', p_) < end) return false;
    out->assign(s_, p_, end - p_);
    p_ = end + 1;
    return true;
  }

  const std::string& s_;
  size_t p_ = 0;
};

// The most tokens one side (input or output) of a trace request may have: a block-hash trace
// line of a few bytes can ask for any length, and it is materialised as token ids.
constexpr int64_t kMaxTraceTokens = int64_t{1} << 24;

// An integer in [lo, hi]; anything else (a float, a string, a number out of range) throws.
int64_t IntIn(const nlohmann::json& x, const char* key, int64_t lo, int64_t hi) {
  const bool ok = x.is_number_integer() && (x.is_number_unsigned() ? x.get<uint64_t>() <= static_cast<uint64_t>(hi)
                                                                   : x.get<int64_t>() >= lo && x.get<int64_t>() <= hi);
  if (!ok)
    throw std::invalid_argument(std::string("'") + key + "' must be an integer in [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "]");
  return x.get<int64_t>();
}

// A session or turn id: an integer a double holds exactly (the fast scanner reads numbers as
// doubles; a cast of 1e19 or nan to int64 is undefined behaviour).
constexpr double kMaxExactId = 9007199254740992.0;  // 2^53
bool IdFromDouble(double v, int64_t* out) {
  if (!(v >= -kMaxExactId && v <= kMaxExactId) || v != static_cast<double>(static_cast<int64_t>(v))) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

// Token ids: an array of integers that fit int32 (get<int32_t>() would read 4294967297 as 1,
// 1.5 as 1, and a bare number as a one-token list).
std::vector<int32_t> IntArray(const nlohmann::json& j, const char* key) {
  const nlohmann::json& a = j.at(key);
  if (!a.is_array()) throw std::invalid_argument(std::string("'") + key + "' must be a list of token ids");
  std::vector<int32_t> v;
  v.reserve(a.size());
  for (const auto& x : a) {
    if (!x.is_number_integer() || (x.is_number_unsigned() ? x.get<uint64_t>() > INT32_MAX
                                                           : x.get<int64_t>() < INT32_MIN || x.get<int64_t>() > INT32_MAX))
      throw std::invalid_argument(std::string("'") + key + "' holds a value that is not a 32-bit token id");
    v.push_back(static_cast<int32_t>(x.get<int64_t>()));
  }
  return v;
}

}  // namespace

core::StatusOr<TraceReader> TraceReader::Open(const std::string& path, TraceFormat format,
                                              int mooncake_block_tokens, TraceLimits limits) {
  TraceReader r;
  r.path_ = path;
  // A regular file or a pipe (--trace <(zcat t.gz)); a folder would read as empty and a device
  // such as /dev/zero as one line that never ends.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
    return core::InvalidArgument("trace " + path + " is not a file or a pipe" + (S_ISDIR(st.st_mode) ? " (a folder)" : ""));
  r.in_ = std::make_unique<std::ifstream>(path);
  if (!*r.in_) return core::NotFound("cannot open trace " + path);
  if (mooncake_block_tokens <= 0) return core::InvalidArgument("block tokens must be positive");
  r.block_tokens_ = mooncake_block_tokens;
  r.limits_ = limits;
  r.format_ = format;
  if (format == TraceFormat::kAuto) {
    // The first non-blank line decides; it is kept for Next() rather than re-read, so a pipe
    // (--trace <(zcat t.gz)), which cannot seek back, works too.
    std::string first;
    for (;;) {
      RADIXLM_ASSIGN_OR_RETURN(const bool more, r.ReadLine(&first));
      if (!more) break;
      ++r.line_no_;
      if (first.find_first_not_of(" \t\r") != std::string::npos) break;
    }
    r.format_ = first.find("\"hash_ids\"") != std::string::npos ? TraceFormat::kMooncake
                                                                : TraceFormat::kMarconi;
    r.pending_ = std::move(first);
    r.pending_line_no_ = r.line_no_;
    r.line_no_ = 0;
  }
  // Output ids of block-hash traces start past every id an input block can produce.
  r.next_output_id_ = 1 << 30;
  return r;
}

core::Status TraceReader::LineError(const std::string& what) const {
  return core::InvalidArgument(path_ + ":" + std::to_string(line_no_) + ": " + what);
}

core::StatusOr<bool> TraceReader::ReadLine(std::string* line) {
  line->clear();
  char buf[1 << 16];
  for (;;) {
    in_->getline(buf, sizeof buf);
    const std::streamsize got = in_->gcount();
    if (in_->bad()) return core::IoError(path_ + ": read error after line " + std::to_string(line_no_));
    const bool eof = in_->eof(), more = !eof && in_->fail();  // more: the buffer filled before the newline
    line->append(buf, static_cast<size_t>(eof || more ? got : got - 1));  // got counts the newline
    if (static_cast<int64_t>(line->size()) > limits_.max_line_bytes)
      return core::InvalidArgument(path_ + ":" + std::to_string(line_no_ + 1) + ": a line longer than " +
                                   std::to_string(limits_.max_line_bytes) + " bytes (not a trace?)");
    if (eof) return !line->empty();  // the last line, without a newline, or the end
    if (!more) return true;
    in_->clear();
  }
}

core::Status TraceReader::ParseMarconi(const std::string& line, TraceRequest* out) {
  bool has_input = false, has_output = false, has_ts = false, bad_id = false;
  out->session_id = out->turn_id = 0;  // absent keys are 0, never the previous line's values
  FlatObjectScanner scanner(line);
  const bool fast = scanner.Scan(
      [&](const std::string& key, double v) {
        if (key == "session_id") bad_id |= !IdFromDouble(v, &out->session_id);
        if (key == "turn_id") bad_id |= !IdFromDouble(v, &out->turn_id);
        if (key == "ts") out->ts = v, has_ts = true;
      },
      [&](const std::string& key, std::vector<int32_t> v) {
        if (key == "input_tokens") out->input = std::move(v), has_input = true;
        if (key == "output_tokens") out->output = std::move(v), has_output = true;
      });
  if (!fast) {
    try {
      const auto j = nlohmann::json::parse(line);
      constexpr int64_t kId = int64_t{1} << 53;
      out->session_id = j.contains("session_id") ? IntIn(j["session_id"], "session_id", -kId, kId) : 0;
      out->turn_id = j.contains("turn_id") ? IntIn(j["turn_id"], "turn_id", -kId, kId) : 0;
      has_ts = j.contains("ts");
      out->ts = j.value("ts", 0.0);
      has_input = j.contains("input_tokens");
      has_output = j.contains("output_tokens");
      if (has_input) out->input = IntArray(j, "input_tokens");
      if (has_output) out->output = IntArray(j, "output_tokens");
    } catch (const std::exception& e) {
      return core::InvalidArgument(path_ + ":" + std::to_string(line_no_) + ": " + e.what());
    }
  }
  if (fast && bad_id)
    return core::InvalidArgument(path_ + ":" + std::to_string(line_no_) +
                                 ": session_id and turn_id must be integers within +-2^53");
  if (!has_input || !has_output || !has_ts)
    return core::InvalidArgument(path_ + ":" + std::to_string(line_no_) +
                                 ": a Marconi trace line needs ts, input_tokens and output_tokens");
  if (!std::isfinite(out->ts)) return core::InvalidArgument(path_ + ":" + std::to_string(line_no_) + ": ts is not a finite number");
  return core::Status::Ok();
}

core::Status TraceReader::ParseMooncake(const std::string& line, TraceRequest* out) {
  try {
    const auto j = nlohmann::json::parse(line);
    const int64_t input_length = IntIn(j.at("input_length"), "input_length", 0, kMaxTraceTokens);
    const int64_t output_length = IntIn(j.at("output_length"), "output_length", 0, kMaxTraceTokens);
    if (output_length > limits_.max_output_tokens)  // before the ids are expanded
      return LineError("output_length " + std::to_string(output_length) + "; the simulator replays at most " +
                       std::to_string(limits_.max_output_tokens) + " output tokens per request (--max-output-tokens)");
    const nlohmann::json& ids = j.at("hash_ids");
    if (!ids.is_array()) throw std::invalid_argument("'hash_ids' must be a list");
    std::vector<int64_t> hashes;
    for (const auto& h : ids) hashes.push_back(IntIn(h, "hash_ids", 0, (int64_t{1} << 30) / block_tokens_ - 1));
    const nlohmann::json& timestamp = j.at("timestamp");
    if (!timestamp.is_number() || !std::isfinite(timestamp.get<double>()))
      throw std::invalid_argument("'timestamp' must be a finite number");
    out->ts = timestamp.get<double>() / 1000.0;
    out->session_id = mooncake_index_;
    out->turn_id = 0;
    const int64_t b = block_tokens_;
    // Output ids are handed out from 2^30 up: a length that would run them past int32 is refused.
    if (output_length > INT32_MAX - next_output_id_)
      return core::InvalidArgument(path_ + ":" + std::to_string(line_no_) + ": output_length " +
                                   std::to_string(output_length) + " exceeds what the trace's output ids can number");
    if (static_cast<int64_t>(hashes.size()) != input_length / b + (input_length % b != 0))
      return core::InvalidArgument(path_ + ":" + std::to_string(line_no_) + ": " +
                                   std::to_string(hashes.size()) + " hash ids do not cover " +
                                   std::to_string(input_length) + " tokens in blocks of " +
                                   std::to_string(b));
    out->input.clear();
    for (size_t i = 0; i < hashes.size(); ++i) {
      const int64_t len = std::min<int64_t>(b, input_length - static_cast<int64_t>(i) * b);
      for (int64_t k = 0; k < len; ++k) out->input.push_back(static_cast<int32_t>(hashes[i] * b + k));
    }
    out->output.resize(output_length);
    for (auto& t : out->output) t = next_output_id_++;
  } catch (const std::exception& e) {
    return core::InvalidArgument(path_ + ":" + std::to_string(line_no_) + ": " + e.what());
  }
  ++mooncake_index_;
  return core::Status::Ok();
}

core::StatusOr<bool> TraceReader::Next(TraceRequest* out) {
  std::string line;
  while (true) {
    if (pending_line_no_ > 0) {  // the line format detection read
      line = std::move(pending_);
      line_no_ = pending_line_no_;
      pending_line_no_ = 0;
    } else {
      RADIXLM_ASSIGN_OR_RETURN(const bool more, ReadLine(&line));
      if (!more) break;
      ++line_no_;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    RADIXLM_RETURN_IF_ERROR(format_ == TraceFormat::kMooncake ? ParseMooncake(line, out)
                                                      : ParseMarconi(line, out));
    if (static_cast<int64_t>(out->output.size()) > limits_.max_output_tokens)
      return LineError(std::to_string(out->output.size()) + " output tokens; the simulator replays at most " +
                       std::to_string(limits_.max_output_tokens) + " per request (--max-output-tokens)");
    if (!std::isfinite(out->ts))  // from_chars reads nan and inf, which JSON has not
      return core::InvalidArgument(path_ + ":" + std::to_string(line_no_) + ": ts is not a finite number");
    if (out->ts < last_ts_)
      return core::InvalidArgument(path_ + ":" + std::to_string(line_no_) +
                                   ": requests must be in arrival order (ts went back)");
    last_ts_ = out->ts;
    return true;
  }
  return false;
}

namespace {
std::string ShortestDouble(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, end);
}
}  // namespace

void WriteMarconiLine(std::ostream& out, const TraceRequest& r) {
  out << "{\"session_id\": " << r.session_id << ", \"turn_id\": " << r.turn_id
      << ", \"ts\": " << ShortestDouble(r.ts) << ", \"num_input_tokens\": " << r.input.size()
      << ", \"num_output_tokens\": " << r.output.size() << ", \"input_tokens\": [";
  for (size_t i = 0; i < r.input.size(); ++i) out << (i ? ", " : "") << r.input[i];
  out << "], \"output_tokens\": [";
  for (size_t i = 0; i < r.output.size(); ++i) out << (i ? ", " : "") << r.output[i];
  out << "]}\n";
}

}  // namespace radixlm::sim
