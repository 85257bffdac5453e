// Decode-step attention of one layer, cascade vs per-request paged attention: B requests share a
// P-token prefix (the same physical KV blocks) and each has S tokens of its own; every request
// decodes one token. Reports the median step time of each (alternated, so machine noise hits
// both alike), the KV bytes each reads, and the ideal speed-up (bytes plain / bytes cascade).
// Shape: Qwen3-0.6B's attention (16 q heads, 8 kv heads x 128), bf16 KV, blocks of 16.
// Usage: cascade_bench [--threads 2] [--repeats 9] [--batch B --prefix P --suffix S] [--mode both|plain|cascade]
// (one JSON line per configuration; B, P, S pick one instead of the sweep; P a multiple of the
// 1024-token split, since cascade groups whole split chunks)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/random.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/peak.h"

namespace {

using radixlm::core::DType;
namespace k = radixlm::kernels;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, repeats = 9, only_batch = 0, only_prefix = 0, only_suffix = 0;
  std::string mode = "both";  // or plain | cascade (one side only: for profiling)
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads") threads = std::atoi(argv[i + 1]);
    if (a == "--repeats") repeats = std::atoi(argv[i + 1]);
    if (a == "--batch") only_batch = std::atoi(argv[i + 1]);
    if (a == "--prefix") only_prefix = std::atoi(argv[i + 1]);
    if (a == "--suffix") only_suffix = std::atoi(argv[i + 1]);
    if (a == "--mode") mode = argv[i + 1];
  }
  const int heads = 16, kv_heads = 8, hd = 128, bt = 16;
  const int64_t kSplit = 1024;  // the model's split: "plain" is the same split without groups
  // Cascade groups whole split chunks only, so a prefix is a multiple of the split (the KV bytes
  // and the grouped pass's time assume every prefix token is read once per tile).
  if (only_prefix % kSplit != 0 || only_batch < 0 || only_prefix < 0 || only_suffix < 0) {
    std::fprintf(stderr,
                 "cascade_bench: --batch and --suffix take a count >= 1, --prefix a multiple of %lld (0 or absent: "
                 "the built-in sweep)\n",
                 static_cast<long long>(kSplit));
    return 2;
  }
  const k::AttentionParams p{heads, kv_heads, hd, 1.0f / std::sqrt(float(hd))};
  radixlm::core::ThreadPool pool(threads);
  radixlm::core::Rng rng(1);
  double fma_peak = k::MeasureFmaPeakGflops(pool);  // raised by a measurement after each shape
  // A value given on the command line replaces its sweep (any batch, prefix, suffix).
  const auto sweep = [](int only, std::vector<int> all) { return only > 0 ? std::vector<int>{only} : all; };
  for (int batch : sweep(only_batch, {8, 32, 64}))
    for (int prefix : sweep(only_prefix, {1024, 4096, 16384}))
      for (int suffix : sweep(only_suffix, {64, 512})) {
        const int prefix_blocks = prefix / bt, own_blocks = (suffix + bt - 1) / bt + 1;
        const int n_blocks = prefix_blocks + batch * own_blocks;
        const size_t elems = size_t(n_blocks) * bt * kv_heads * hd;
        std::vector<uint16_t> kbuf(elems), vbuf(elems);
        for (auto& x : kbuf) x = radixlm::core::F32ToBf16(static_cast<float>(rng.Normal(0, 1)));
        for (auto& x : vbuf) x = radixlm::core::F32ToBf16(static_cast<float>(rng.Normal(0, 1)));
        const k::KvLayerView kv{kbuf.data(), vbuf.data(), bt, kv_heads, hd, DType::kBF16};
        std::vector<int32_t> shared(prefix_blocks);
        for (int b = 0; b < prefix_blocks; ++b) shared[b] = b;
        std::vector<std::vector<int32_t>> tables(batch);
        std::vector<k::AttentionSeq> seqs;
        std::vector<int32_t> pos(batch);
        k::CascadeGroup group;
        group.prefix_blocks = shared;
        for (int r = 0; r < batch; ++r) {
          tables[r] = shared;
          for (int b = 0; b < own_blocks; ++b) tables[r].push_back(prefix_blocks + r * own_blocks + b);
          pos[r] = prefix + suffix - 1;  // the decoded token's position
          group.rows.push_back(r);
        }
        for (int r = 0; r < batch; ++r) seqs.push_back({r, 1, tables[r]});
        std::vector<float> q(size_t(batch) * heads * hd), out(q.size()), lse(size_t(batch) * heads);
        for (float& x : q) x = static_cast<float>(rng.Normal(0, 1));
        // The grouped pass: one sequence of the B rows over the shared blocks, per split chunk.
        std::vector<int32_t> group_pos(batch);
        std::vector<float> group_out(out.size()), group_lse(lse.size());
        auto time_group = [&] {
          const auto t0 = std::chrono::steady_clock::now();
          for (int64_t c0 = 0; c0 < prefix; c0 += kSplit) {
            std::fill(group_pos.begin(), group_pos.end(), static_cast<int32_t>(std::min<int64_t>(prefix, c0 + kSplit) - 1));
            const k::AttentionSeq g{0, batch, shared, c0};
            k::PagedAttention(pool, p, kv, {&g, 1}, group_pos.data(), q.data(), group_out.data(), group_lse.data());
          }
          return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        };
        std::vector<double> plain_s, cascade_s, group_s;
        auto time = [&](bool cascade) {
          const auto t0 = std::chrono::steady_clock::now();
          if (cascade) k::CascadeAttention(pool, p, kv, seqs, pos.data(), q.data(), {&group, 1}, kSplit, out.data(), lse.data());
          else k::CascadeAttention(pool, p, kv, seqs, pos.data(), q.data(), {}, kSplit, out.data(), lse.data());
          return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        };
        time(false);
        time(true);
        for (int i = 0; i < repeats; ++i) {
          plain_s.push_back(mode != "cascade" ? time(false) : 1.0);
          cascade_s.push_back(mode != "plain" ? time(true) : 1.0);
          group_s.push_back(mode != "plain" ? time_group() : 1.0);
        }
        // K and V of a token, all kv heads, bf16.
        const double token_bytes = 2.0 * kv_heads * hd * 2;
        const int tiles = (batch + (k::CascadeTileRows(heads / kv_heads)) - 1) / k::CascadeTileRows(heads / kv_heads);
        const double plain_bytes = token_bytes * batch * double(prefix + suffix);
        const double cascade_bytes = token_bytes * (double(prefix) * tiles + double(batch) * suffix);
        fma_peak = std::max(fma_peak, k::MeasureFmaPeakGflops(pool));
        const double tp = Median(plain_s), tc = Median(cascade_s), tg = Median(group_s);
        const double group_gflop = 4.0 * batch * heads * double(prefix) * hd / 1e9;
        const double ideal = plain_bytes / cascade_bytes, speedup = tp / tc;
        std::printf("{\"isa\":\"%s\",\"threads\":%d,\"batch\":%d,\"shared_prefix\":%d,\"suffix\":%d,"
                    "\"plain_ms\":%.3f,\"cascade_ms\":%.3f,\"speedup\":%.2f,\"kv_bytes_plain\":%.0f,"
                    "\"kv_bytes_cascade\":%.0f,\"ideal\":%.2f,\"of_ideal\":%.2f,\"plain_gb_s\":%.1f,\"group_ms\":%.3f,"
                    "\"group_gflop_s\":%.1f,\"fma_peak_gflop_s\":%.1f,\"group_of_peak\":%.2f}\n",
                    radixlm::core::IsaName(radixlm::core::ActiveIsa()), threads, batch, prefix, suffix, tp * 1e3,
                    tc * 1e3, speedup, plain_bytes, cascade_bytes, ideal, speedup / ideal, plain_bytes / tp / 1e9, tg * 1e3,
                    group_gflop / tg, fma_peak, group_gflop / tg / fma_peak);
        std::fflush(stdout);
      }
  return 0;
}
