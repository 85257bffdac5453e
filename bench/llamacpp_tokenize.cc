// llama.cpp's token ids for many texts: the comparison side of tests/reference/
// tokenizer_llamacpp_test.py (built by bench/vs_llamacpp.sh against the llama.cpp it builds;
// never part of radixlm's build or runtime). It calls llama_tokenize as llama-tokenize
// --no-bos does (special tokens parsed, no BOS/EOS added: `radixlm tokenize`'s default), once
// per text, without paying a process start and a vocabulary load per text.
// Usage: llamacpp_tokenize MODEL.gguf IN.jsonl OUT.jsonl
//   IN: one {"text": ...} per line; OUT: one {"ids": [...]} per line, in order.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf IN.jsonl OUT.jsonl\n", argv[0]);
    return 2;
  }
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::ifstream in(argv[2]);
  std::ofstream out(argv[3]);
  if (!in || !out) {
    std::fprintf(stderr, "cannot open %s or %s\n", argv[2], argv[3]);
    return 1;
  }
  std::vector<llama_token> ids;
  for (std::string line; std::getline(in, line);) {
    const std::string text = nlohmann::json::parse(line).at("text").get<std::string>();
    ids.resize(text.size() + 8);
    int n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                           static_cast<int32_t>(ids.size()), /*add_special=*/false, /*parse_special=*/true);
    if (n < 0) {
      ids.resize(-n);
      n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                         static_cast<int32_t>(ids.size()), false, true);
    }
    ids.resize(n < 0 ? 0 : n);
    out << nlohmann::json({{"ids", ids}}).dump() << "\n";
  }
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
