// Hugging Face tokenizer loader (Tokenizer::FromHfJson, tokenizer/tokenizer.h): the input is a
// tokenizer.json, optionally followed by a line "#tokenizer_config.json#" and that file's text
// (the loader reads tokenizer_config.json from the same folder: BOS/EOS, chat template). A
// tokenizer that loads encodes and decodes a short fixed text (plain, with special tokens added,
// and with a literal range, as chat content is encoded), and streams the ids back out.
#include <filesystem>
#include <string>
#include <string_view>

#include "fuzz_common.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using radixlm::tokenizer::Tokenizer;
  static const std::string dir = [] {
    std::filesystem::create_directories(radixlm::fuzz::ScratchDir() + "/tok");
    return std::string("tok/");
  }();
  constexpr std::string_view kSeparator = "\n#tokenizer_config.json#\n";
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t sep = input.find(kSeparator);
  const std::string path = radixlm::fuzz::WriteScratch(dir + "tokenizer.json", input.substr(0, sep));
  if (sep == std::string_view::npos) radixlm::fuzz::RemoveScratch(dir + "tokenizer_config.json");
  else radixlm::fuzz::WriteScratch(dir + "tokenizer_config.json", input.substr(sep + kSeparator.size()));

  auto loaded = Tokenizer::FromHfJson(path);
  if (!loaded.ok()) return 0;
  const Tokenizer& tok = **loaded;
  // ASCII words and punctuation, spaces, NFC-relevant and 4-byte UTF-8, an invalid byte, ChatML
  // special tokens, digits.
  static constexpr std::string_view kText =
      "Hello, world!  It's   yes/no? <|im_start|>user\nCafe\xcc\x81 caf\xc3\xa9 \xf0\x9f\x98\x80 \xff\xfe 12345\n\n"
      "<|endoftext|><s>[INST] tabs\tand\r\nlines </s>";
  std::vector<int32_t> ids = tok.Encode(kText);
  (void)tok.Decode(ids);
  (void)tok.Decode(ids, /*skip_special=*/true);
  (void)tok.RoundTripForm(kText);
  ids = tok.Encode(kText, /*add_special=*/true);
  // Literal ranges: one cuts <|im_start|>, one is exactly <|endoftext|>.
  const radixlm::tokenizer::TextRange literal[] = {{7, 36}, {75, 88}};
  ids = tok.Encode(kText, /*add_special=*/false, literal);
  radixlm::tokenizer::StreamDecoder stream(tok);
  for (int32_t id : ids) (void)stream.Push(id);
  (void)stream.Finish();
  (void)tok.TokenId("<|im_end|>");
  for (int32_t id = 0; id < tok.vocab_size() && id < 64; ++id) (void)tok.TokenBytes(id);
  return 0;
}
