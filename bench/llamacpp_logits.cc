// llama.cpp's logits for given token ids: the comparison side of bench/vs_llamacpp.sh (built by
// that script against the llama.cpp it builds; never part of radixlm's build or runtime).
// Usage: llamacpp_logits MODEL.gguf IDS(comma-separated) OUT.f32 [THREADS]
// Writes [n_ids, n_vocab] little-endian f32, the layout of `radixlm logits --out`.
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf IDS OUT.f32 [THREADS]\n", argv[0]);
    return 2;
  }
  std::vector<llama_token> ids;
  std::stringstream ss(argv[2]);
  for (std::string item; std::getline(ss, item, ',');) ids.push_back(std::atoi(item.c_str()));
  const int threads = argc > 4 ? std::atoi(argv[4]) : 2;
  const int n = static_cast<int>(ids.size());

  llama_backend_init();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = n + 16;
  cp.n_batch = n;
  cp.n_ubatch = n;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "cannot create a context\n");
    return 1;
  }
  llama_batch batch = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    batch.token[i] = ids[i];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;  // every position's logits
  }
  batch.n_tokens = n;
  if (llama_decode(ctx, batch) != 0) {
    std::fprintf(stderr, "llama_decode failed\n");
    return 1;
  }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::FILE* out = std::fopen(argv[3], "wb");
  if (!out) return 1;
  for (int i = 0; i < n; ++i) std::fwrite(llama_get_logits_ith(ctx, i), sizeof(float), n_vocab, out);
  std::fclose(out);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
