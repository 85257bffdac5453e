#include "runner/tier_setup.h"

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "models/describe.h"
#include "models/kv_store.h"
#include "models/ssm_state.h"

namespace radixlm::runner {
namespace {

namespace fs = std::filesystem;

std::string HexOf(const unsigned char* d, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[d[i] >> 4];
    s += digits[d[i] & 15];
  }
  return s;
}

std::string Sha256Text(const std::string& text) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), d);
  return HexOf(d, sizeof d);
}

core::StatusOr<std::string> Sha256File(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return core::IoError("cannot read " + p.string() + " to fingerprint the model");
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<char> buf(size_t{8} << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx.get(), d, &n);
  return HexOf(d, n);
}

// The weights' digest, remembered per file identity in <cache_dir>/weights/ (no cache_dir, as
// with only a remote tier: computed at every start).
core::StatusOr<std::string> WeightsDigest(const std::string& model, const std::string& cache_dir) {
  std::error_code ec;
  const fs::path path = fs::weakly_canonical(model, ec);
  if (ec || !fs::exists(path)) return "preset:" + model;  // random:NAME: seeded weights, the name says it all
  std::vector<fs::path> files;
  if (fs::is_directory(path)) {
    for (const auto& e : fs::directory_iterator(path))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  std::string identity = path.string();
  for (const fs::path& f : files) {
    struct stat st;
    if (stat(f.c_str(), &st) != 0) return core::IoError("cannot stat " + f.string());
    identity += "\n" + f.filename().string() + " " + std::to_string(st.st_size) + " " +
                std::to_string(int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec) + " " + std::to_string(st.st_ino);
  }
  const fs::path memo = fs::path(cache_dir) / "weights" / Sha256Text(identity);
  if (!cache_dir.empty()) {
    std::ifstream in(memo);
    std::string digest;
    if (in >> digest && digest.size() == 64) return digest;
  }
  std::string all;
  for (const fs::path& f : files) {
    auto d = Sha256File(f);
    if (!d.ok()) return d.status();
    all += f.filename().string() + "=" + *d + "\n";
  }
  const std::string digest = files.size() == 1 ? all.substr(all.find('=') + 1, 64) : Sha256Text(all);
  if (cache_dir.empty()) return digest;
  fs::create_directories(memo.parent_path(), ec);
  const fs::path tmp = memo.string() + ".tmp" + std::to_string(getpid());
  if (std::ofstream(tmp) << digest << "\n") fs::rename(tmp, memo, ec);
  return digest;
}

}  // namespace

core::StatusOr<std::string> ModelFingerprint(const std::string& weights_path, const models::Transformer& model,
                                             core::DType kv_dtype, const ServingOptions& eo, const std::string& cache_dir,
                                             const models::WindowRings& rings) {
  auto weights = WeightsDigest(weights_path, cache_dir);
  if (!weights.ok()) return weights.status();
  const models::ModelConfig& c = model.config();
  std::ostringstream f;
  f.precision(17);
  f << "format=radixlm-kv-tier/1\n"
    << "weights=" << *weights << "\n"
    << "numerics=" << models::MatmulDescription(model) << "\n"
    << "kv_dtype=" << core::DTypeName(kv_dtype) << "\n"
    << "block_tokens=" << eo.block_tokens << "\n"
    << "ssm_chunk=" << c.ssm_chunk << "\n"
    << "arch=" << c.arch << "\nvocab_size=" << c.vocab_size << "\nd_model=" << c.d_model << "\nn_blocks=" << c.n_blocks
    << "\nn_heads=" << c.n_heads << "\nn_kv_heads=" << c.n_kv_heads << "\nhead_dim=" << c.head_dim
    << "\nattention_layers=" << c.n_attention_layers() << "\nrms_eps=" << c.rms_eps << "\nrope_theta=" << c.rope_theta
    << "\nrope_layout=" << static_cast<int>(c.rope_layout) << "\nrope_dim=" << c.rope_dim << "\nuse_rope=" << c.use_rope
    << "\nrope_scaling=" << c.rope_scaling.factor << "," << c.rope_scaling.low_freq_factor << ","
    << c.rope_scaling.high_freq_factor << "," << c.rope_scaling.original_max_position << "\nrope_sections=";
  for (int s : c.rope_sections) f << s << ",";
  f << "\nrope_freq_factors=";
  for (float x : c.rope_freq_factors) f << x << ",";
  f << "\nlayers=";
  for (models::LayerKind k : c.layers) f << static_cast<int>(k) << ",";
  f << "\nssm=" << c.ssm_heads << "," << c.ssm_head_dim << "," << c.ssm_state << "," << c.ssm_groups << "," << c.ssm_conv << ","
    << c.ssm_norm_group << "\ngdn=" << c.gdn_k_heads << "," << c.gdn_v_heads << "," << c.gdn_head_dim << "," << c.gdn_tiled;
  if (c.short_conv > 0) f << "\nshort_conv=" << c.short_conv;  // (absent otherwise, as below)
  if (c.sliding_window() > 0) {  // (absent otherwise: other models' folders stay valid)
    f << "\nlayer_window=";
    for (int w : c.layer_window) f << w << ",";
    // Window rings change what a block and a state hold (and the ring's length, a state's size).
    f << "\nwindow_rings=" << rings.ring_tokens;
  }
  if (!c.layer_head_dim.empty() || !c.layer_kv_source.empty()) {  // Gemma 4's per-layer shapes
    f << "\nlayer_shapes=";
    for (int a = 0; a < c.n_attention_layers(); ++a) f << c.AttnKvHeads(a) << "x" << c.AttnHeadDim(a) << "<" << c.KvSource(a) << ",";
  }
  f << "\nnamespace=" << eo.cache_namespace << "\n";
  return f.str();
}

core::StatusOr<std::unique_ptr<tier::Tier>> MakeTiers(const std::string& weights_path, const models::Transformer& model,
                                                      core::DType kv_dtype, const ServingOptions& eo,
                                                      const models::WindowRings& rings) {
  if (eo.cache_dir.empty() && eo.cache_remote.empty()) return std::unique_ptr<tier::Tier>();
  if (eo.no_prefix_cache) return core::InvalidArgument("--cache-dir and --cache-remote need the prefix cache (drop --no-prefix-cache)");
  if (!eo.cache_dir.empty() && !(eo.cache_disk_gb > 0)) return core::InvalidArgument("--cache-disk-gb must be positive");
  std::error_code ec;
  if (!eo.cache_dir.empty()) fs::create_directories(eo.cache_dir, ec);
  auto fp = ModelFingerprint(weights_path, model, kv_dtype, eo, eo.cache_dir, rings);
  if (!fp.ok()) return fp.status();
  tier::TierSetup tc;
  tc.fingerprint = *fp;
  tc.block_tokens = eo.block_tokens;
  tc.block_bytes = models::KvStore::BytesPerBlock(model.config(), eo.block_tokens, kv_dtype, rings.ring_tokens > 0);
  if (model.config().n_ssm_layers() > 0 || rings.ring_tokens > 0)
    tc.state_bytes = models::SsmStateStore::BytesPerSlot(model.config(), rings);
  tc.disk_dir = eo.cache_dir;
  tc.disk_capacity_bytes = static_cast<int64_t>(eo.cache_disk_gb * 1e9);
  tc.disk_fsync = eo.cache_fsync;
  tc.remote_url = eo.cache_remote;
  tc.remote_password_file = eo.cache_remote_password_file;
  return tier::OpenTiers(tc);
}

}  // namespace radixlm::runner
