// JSON in and out where the bytes come from a client or a file.
//
// JsonText: nlohmann's dump() throws on a string that is not valid UTF-8 (a header value, a
// model path, a GGUF name); every JSON this project writes goes through JsonText instead, which
// replaces invalid bytes with U+FFFD and never throws on content.
//
// ParseJsonBounded: nlohmann's DOM costs 16 bytes per value plus a heap block per container and
// per long string, so a body of 8 MiB of '[' once cost 545 MiB (65x; issue 25). Before the DOM is
// built, one SAX pass (no allocation beyond nlohmann's bit stack) refuses nesting deeper than
// max_depth and estimates the DOM's bytes; a body whose estimate exceeds
// max_bytes_per_input_byte x its size + slack_bytes is refused before any of it is allocated.
// The estimate counts what libstdc++ and malloc allocate (Estimator's constants). Thread-safe
// (no state).
//
// Ordered documents (objects keep their key order) are built by OrderedBuilder, not by
// nlohmann's parser: nlohmann's ordered_map finds a key by a linear scan on every insert, so an
// object of n keys cost O(n^2) (150k keys: 30 s of a core). The builder appends, and looks a key
// up in a hash index once an object has more than a few keys: linear in the text. Duplicate keys
// keep the first one's place and the last one's value, as nlohmann does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace radixlm::core {

inline std::string JsonText(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

struct JsonLimits {
  int max_depth = 128;                   // arrays and objects inside each other
  double max_bytes_per_input_byte = 12;  // the DOM's estimated size over the text's
  int64_t slack_bytes = 4 << 20;         // plus this much (small documents)
};

enum class JsonParseError { kNone, kInvalid, kTooDeep, kTooLarge };

struct JsonParse {
  nlohmann::json value;  // discarded unless error == kNone (and not `ordered`)
  nlohmann::ordered_json ordered_value;  // with `ordered`: objects keep their key order
  JsonParseError error = JsonParseError::kNone;
  int64_t estimated_bytes = 0;  // the SAX pass's estimate of the DOM's size
};

namespace json_internal {

// The SAX pass: depth and a running estimate of the DOM's bytes; false stops the parse.
class Estimator final : public nlohmann::json_sax<nlohmann::json> {
 public:
  Estimator(int max_depth, int64_t max_bytes) : max_depth_(max_depth), max_bytes_(max_bytes) {}
  bool null() override { return Add(kScalar); }
  bool boolean(bool) override { return Add(kScalar); }
  bool number_integer(number_integer_t) override { return Add(kScalar); }
  bool number_unsigned(number_unsigned_t) override { return Add(kScalar); }
  bool number_float(number_float_t, const string_t&) override { return Add(kScalar); }
  bool string(string_t& s) override { return Add(kScalar + StringBytes(s)); }
  bool binary(binary_t& b) override { return Add(kScalar + kBlock + 16 + static_cast<int64_t>(b.size())); }
  bool start_object(std::size_t) override { return Open(kScalar + kBlock + 48); }
  bool key(string_t& k) override { return Add(32 + 16 + StringBytes(k)); }  // node + value
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(kScalar + kBlock + 24); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    invalid_ = true;
    return false;
  }

  bool too_deep() const { return too_deep_; }
  bool too_large() const { return too_large_; }
  bool invalid() const { return invalid_; }
  int64_t bytes() const { return bytes_; }

 private:
  // A value is 16 bytes in its parent's vector, which growth may have doubled (and while it
  // grows, the old and the new buffer are both held: 48 bytes per element); a string, array
  // or object is also a heap block (malloc's 16-byte header included) holding a std::string
  // (32), std::vector (24) or std::map (48); an object member is a red-black node of 32 bytes
  // plus its key (32) and value (16); a string over 15 bytes has its characters on the heap.
  static constexpr int64_t kScalar = 48;
  static constexpr int64_t kBlock = 16;
  static int64_t StringBytes(const std::string& s) {
    return kBlock + 32 + (s.size() > 15 ? static_cast<int64_t>(s.size()) + 1 + kBlock : 0);
  }
  bool Add(int64_t n) {
    bytes_ += n;
    if (bytes_ > max_bytes_) too_large_ = true;
    return !too_large_;
  }
  bool Open(int64_t n) {
    if (++depth_ > max_depth_) {
      too_deep_ = true;
      return false;
    }
    return Add(n);
  }
  bool Close() {
    --depth_;
    return true;
  }

  const int max_depth_;
  const int64_t max_bytes_;
  int depth_ = 0;
  int64_t bytes_ = 0;
  bool too_deep_ = false, too_large_ = false, invalid_ = false;
};

// Builds an ordered_json from SAX events in time linear in the text (see the file comment).
class OrderedBuilder final : public nlohmann::json_sax<nlohmann::ordered_json> {
 public:
  using Json = nlohmann::ordered_json;
  explicit OrderedBuilder(Json* root) : root_(root) {}
  bool null() override { return Put(Json(nullptr)); }
  bool boolean(bool v) override { return Put(Json(v)); }
  bool number_integer(number_integer_t v) override { return Put(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Put(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Put(Json(v)); }
  bool string(string_t& v) override { return Put(Json(std::move(v))); }
  bool binary(binary_t& v) override { return Put(Json::binary(std::move(v))); }
  bool start_object(std::size_t) override { return Open(Json::object()); }
  bool start_array(std::size_t) override { return Open(Json::array()); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(string_t& k) override {
    Frame& f = stack_.back();
    auto& items = static_cast<Items&>(f.value->get_ref<Json::object_t&>());
    if (items.size() >= kIndexFrom && f.index.empty())
      for (size_t i = 0; i < items.size(); ++i) f.index.emplace(items[i].first, i);
    size_t at = SIZE_MAX;
    if (!f.index.empty()) {
      auto it = f.index.find(k);
      if (it != f.index.end()) at = it->second;
    } else {
      for (size_t i = 0; i < items.size() && at == SIZE_MAX; ++i)
        if (items[i].first == k) at = i;
    }
    if (at == SIZE_MAX) {  // a new key: appended (the index, when there is one, learns it)
      at = items.size();
      if (!f.index.empty()) f.index.emplace(k, at);
      items.emplace_back(std::move(k), Json());
    }
    slot_ = &items[at].second;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  using Items = std::vector<std::pair<const std::string, Json>>;
  static constexpr size_t kIndexFrom = 16;
  struct Frame {
    Json* value;
    std::unordered_map<std::string, size_t> index;  // key -> position, for objects past kIndexFrom
  };
  // Where the next value goes: the root, the pending key's slot, or the end of an array.
  Json* Slot() {
    if (stack_.empty()) return root_;
    Json* c = stack_.back().value;
    if (c->is_array()) {
      c->get_ref<Json::array_t&>().emplace_back();
      return &c->get_ref<Json::array_t&>().back();
    }
    return slot_;
  }
  bool Put(Json v) {
    *Slot() = std::move(v);
    return true;
  }
  bool Open(Json v) {
    Json* at = Slot();
    *at = std::move(v);
    stack_.push_back({at, {}});
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return true;
  }

  Json* root_;
  Json* slot_ = nullptr;
  std::vector<Frame> stack_;
};

}  // namespace json_internal

// REQUIRES: nothing; never throws on content (a NUL byte is invalid JSON here, not an end).
// ordered: the document goes to ordered_value (objects keep the order of their keys: JSON Schema
// properties, tool definitions and chat messages render and constrain in the client's order).
inline JsonParse ParseJsonBounded(std::string_view text, const JsonLimits& limits = {}, bool ordered = false) {
  JsonParse out;
  if (text.find('\0') != std::string_view::npos) {
    out.error = JsonParseError::kInvalid;
    return out;
  }
  const int64_t max_bytes =
      static_cast<int64_t>(limits.max_bytes_per_input_byte * static_cast<double>(text.size())) + limits.slack_bytes;
  json_internal::Estimator sax(limits.max_depth, max_bytes);
  const bool ok = nlohmann::json::sax_parse(text.begin(), text.end(), &sax, nlohmann::json::input_format_t::json,
                                            /*strict=*/true);
  out.estimated_bytes = sax.bytes();
  if (sax.too_deep()) out.error = JsonParseError::kTooDeep;
  else if (sax.too_large()) out.error = JsonParseError::kTooLarge;
  else if (!ok || sax.invalid()) out.error = JsonParseError::kInvalid;
  if (out.error != JsonParseError::kNone) return out;
  if (ordered) {
    json_internal::OrderedBuilder builder(&out.ordered_value);
    if (!nlohmann::ordered_json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json,
                                           /*strict=*/true))
      out.error = JsonParseError::kInvalid;
    return out;
  }
  out.value = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (out.value.is_discarded()) out.error = JsonParseError::kInvalid;
  return out;
}

}  // namespace radixlm::core
