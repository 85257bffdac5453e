#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/safetensors.h"

namespace radixlm::formats {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/radixlm_formats_XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string ReadAll(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
void WriteAll(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

std::string WriteSmallGguf(const TempDir& dir, std::vector<float>* weights) {
  *weights = {1, 2, 3, 4, 5, 6};
  GgufWriter w;
  w.Set("general.architecture", GgufValue::Str("llama"));
  w.Set("llama.block_count", GgufValue::U32(3));
  w.Set("llama.rope.freq_base", GgufValue::F32(10000.0f));
  w.Set("tokenizer.ggml.tokens", GgufValue::Array(GgufType::kString, {GgufValue::Str("a"), GgufValue::Str("b")}));
  w.AddTensor("t.weight", core::DType::kF32, {2, 3}, weights->data());
  const std::string path = dir.File("small.gguf");
  EXPECT_TRUE(w.Write(path).ok());
  return path;
}

TEST(GgufTest, WriterAndReaderRoundTripMetadataAndTensors) {
  TempDir dir;
  std::vector<float> weights;
  const std::string path = WriteSmallGguf(dir, &weights);
  auto g = GgufFile::Open(path);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(*g->GetString("general.architecture"), "llama");
  EXPECT_EQ(*g->GetInt("llama.block_count"), 3);
  EXPECT_FLOAT_EQ(*g->GetFloat("llama.rope.freq_base"), 10000.0f);
  ASSERT_EQ(g->Find("tokenizer.ggml.tokens")->array.size(), 2u);
  EXPECT_EQ(g->Find("tokenizer.ggml.tokens")->array[1].AsString(), "b");
  const TensorEntry* t = g->tensors().Find("t.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(0, std::memcmp(t->data, weights.data(), 24));
  EXPECT_FALSE(g->GetInt("general.architecture").ok());  // wrong type is an error, not a guess
  EXPECT_FALSE(g->GetInt("missing.key").ok());
}

TEST(GgufTest, EveryTruncationIsAnErrorNotACrash) {
  TempDir dir;
  std::vector<float> weights;
  const std::string bytes = ReadAll(WriteSmallGguf(dir, &weights));
  const std::string cut = dir.File("cut.gguf");
  // The last 8 bytes pad the 24-byte tensor to the 32-byte alignment; the reader needs
  // everything before them.
  const size_t needed = bytes.size() - 8;
  for (size_t n = 0; n <= bytes.size(); ++n) {
    WriteAll(cut, bytes.substr(0, n));
    if (n >= needed) {
      EXPECT_TRUE(GgufFile::Open(cut).ok()) << n;
      continue;
    }
    auto g = GgufFile::Open(cut);
    EXPECT_FALSE(g.ok()) << "truncated to " << n << " bytes";
    if (!g.ok()) {
      EXPECT_NE(g.status().message().find(cut), std::string::npos) << "error names the file";
    }
  }
}

TEST(GgufTest, CorruptedBytesNeverCrash) {
  TempDir dir;
  std::vector<float> weights;
  const std::string bytes = ReadAll(WriteSmallGguf(dir, &weights));
  const std::string bad = dir.File("bad.gguf");
  std::srand(1);
  for (int trial = 0; trial < 300; ++trial) {
    std::string b = bytes;
    for (int i = 0; i < 4; ++i) b[std::rand() % b.size()] = static_cast<char>(std::rand());
    WriteAll(bad, b);
    auto g = GgufFile::Open(bad);  // may succeed if only tensor data changed; must not crash
    (void)g;
  }
  WriteAll(bad, "GGUF\x09\0\0\0" + std::string(16, '\0'));
  auto g = GgufFile::Open(bad);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("version 9"), std::string::npos);
  WriteAll(bad, "not a gguf file at all");
  EXPECT_NE(GgufFile::Open(bad).status().message().find("bad magic"), std::string::npos);
  EXPECT_FALSE(GgufFile::Open(dir.File("missing.gguf")).ok());
}

TEST(GgufTest, ReadsFileWrittenByLlamaCppConverter) {
  const char* shared = std::getenv("RADIXLM_SHARED_DATA");  // CMake's; unset: no shared data
  const std::string path = std::string(shared ? shared : "") + "/models/llama-2-tiny-random.gguf";
  if (shared == nullptr || !fs::exists(path)) GTEST_SKIP() << "shared data absent (RADIXLM_SHARED_DATA)";
  auto g = GgufFile::Open(path);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(*g->GetString("general.architecture"), "llama");
  EXPECT_EQ(g->Find("tokenizer.ggml.tokens")->array.size(), 32000u);
  const TensorEntry* emb = g->tensors().Find("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{32000, 8}));
  EXPECT_EQ(emb->dtype, core::DType::kF16);
  EXPECT_EQ(g->tensors().Find("blk.0.ffn_down.weight")->shape, (std::vector<int64_t>{8, 32}));
}

TEST(SafetensorsTest, RoundTripAndShapeMismatchIsNamed) {
  TempDir dir;
  const std::vector<float> a = {1, 2, 3, 4};
  const std::vector<uint16_t> b = {core::F32ToBf16(1.5f), core::F32ToBf16(-2.0f)};
  ASSERT_TRUE(WriteSafetensorsFile(dir.File("model.safetensors"), {{"a", core::DType::kF32, {2, 2}, a.data()},
                                                                  {"b", core::DType::kBF16, {2}, b.data()}}).ok());
  auto store = ReadSafetensorsFolder(dir.File(""));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const TensorEntry* ea = (*store)->Find("a");
  ASSERT_NE(ea, nullptr);
  EXPECT_EQ(static_cast<const float*>(ea->data)[3], 4.0f);
  EXPECT_EQ((*store)->Find("b")->dtype, core::DType::kBF16);
  auto wrong = (*store)->Get("a", {4});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("'a' has shape [2, 2], expected [4]"), std::string::npos);
  EXPECT_FALSE((*store)->Get("nope", {1}).ok());
}

TEST(SafetensorsTest, ShardedFolderFollowsIndexAndReportsMissingTensors) {
  TempDir dir;
  const std::vector<float> a = {1, 2}, b = {3};
  ASSERT_TRUE(WriteSafetensorsFile(dir.File("s1.safetensors"), {{"a", core::DType::kF32, {2}, a.data()}}).ok());
  ASSERT_TRUE(WriteSafetensorsFile(dir.File("s2.safetensors"), {{"b", core::DType::kF32, {1}, b.data()}}).ok());
  WriteAll(dir.File("model.safetensors.index.json"), R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  auto store = ReadSafetensorsFolder(dir.File(""));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(static_cast<const float*>((*store)->Find("b")->data)[0], 3.0f);
  WriteAll(dir.File("model.safetensors.index.json"), R"({"weight_map": {"a": "s1.safetensors", "c": "s2.safetensors"}})");
  auto missing = ReadSafetensorsFolder(dir.File(""));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'c' is missing"), std::string::npos);
}

TEST(SafetensorsTest, TruncatedAndMalformedFilesAreErrors) {
  TempDir dir;
  const std::vector<float> a(64, 1.0f);
  const std::string path = dir.File("model.safetensors");
  ASSERT_TRUE(WriteSafetensorsFile(path, {{"a", core::DType::kF32, {64}, a.data()}}).ok());
  const std::string bytes = ReadAll(path);
  for (size_t n : {size_t{0}, size_t{4}, size_t{12}, bytes.size() - 1}) {
    WriteAll(path, bytes.substr(0, n));
    TensorStore store;
    EXPECT_FALSE(ReadSafetensorsFile(path, &store).ok()) << n;
  }
  std::string header = R"({"a": {"dtype": "F32", "shape": [64], "data_offsets": [0, 100]}})";
  std::string file(8, '\0');
  const uint64_t len = header.size();
  std::memcpy(file.data(), &len, 8);
  WriteAll(path, file + header + std::string(256, '\0'));
  TensorStore store;
  auto st = ReadSafetensorsFile(path, &store);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("needs 256"), std::string::npos) << st.message();
}

// A GGUF built byte by byte, for headers no writer would produce.
struct RawGguf {
  std::string bytes;
  template <typename T>
  RawGguf& Put(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  RawGguf& Str(const std::string& s) {
    Put<uint64_t>(s.size());
    bytes += s;
    return *this;
  }
  static RawGguf Header(uint64_t n_tensors, uint64_t n_kv) {
    RawGguf g;
    g.Put<uint32_t>(0x46554747).Put<uint32_t>(3).Put<uint64_t>(n_tensors).Put<uint64_t>(n_kv);
    return g;
  }
};

TEST(GgufTest, HostileCountsAndSizesAreErrorsNotAllocations) {
  TempDir dir;
  const std::string path = dir.File("hostile.gguf");
  auto open_error = [&](const RawGguf& g) {
    WriteAll(path, g.bytes + std::string(64, '\0'));
    auto f = GgufFile::Open(path);
    return f.ok() ? std::string("opened") : f.status().message();
  };
  // An array of 2^28 bytes declared in a 100-byte file (was: ~21 GB of values allocated first).
  RawGguf array = RawGguf::Header(0, 1);
  array.Str("a").Put<uint32_t>(9).Put<uint32_t>(0).Put<uint64_t>(1ull << 28);
  EXPECT_NE(open_error(array).find("array of 268435456 items"), std::string::npos) << open_error(array);
  // A million tensors declared in a 100-byte file.
  EXPECT_NE(open_error(RawGguf::Header(1u << 20, 0)).find("implausible header"), std::string::npos);
  // Dimensions whose product overflows 64 bits (2^40 x 2^22 x 4 bytes = 2^64 = 0): not "0 bytes, fits".
  RawGguf overflow = RawGguf::Header(1, 0);
  overflow.Str("t").Put<uint32_t>(2).Put<uint64_t>(1ull << 22).Put<uint64_t>(1ull << 40).Put<uint32_t>(0).Put<uint64_t>(0);
  EXPECT_NE(open_error(overflow).find("implausibly large"), std::string::npos) << open_error(overflow);
  // An offset that wraps data_start + offset around to 0.
  RawGguf wrap = RawGguf::Header(1, 0);
  wrap.Str("t").Put<uint32_t>(1).Put<uint64_t>(4).Put<uint32_t>(0);
  const uint64_t data_start = (wrap.bytes.size() + 8 + 31) / 32 * 32;
  wrap.Put<uint64_t>(0 - data_start);
  EXPECT_NE(open_error(wrap).find("runs past the end"), std::string::npos) << open_error(wrap);
}

TEST(SafetensorsTest, OverflowingShapesAndDeepNestingAreErrors) {
  TempDir dir;
  const std::string path = dir.File("model.safetensors");
  auto read_error = [&](const std::string& header) {
    std::string file(8, '\0');
    const uint64_t len = header.size();
    std::memcpy(file.data(), &len, 8);
    WriteAll(path, file + header);
    TensorStore store;
    const core::Status st = ReadSafetensorsFile(path, &store);
    return st.ok() ? std::string("read") : st.message();
  };
  // 2^40 x 2^22 x 4 bytes wraps to 0, which data_offsets [0, 0] would have matched.
  const std::string big = read_error(R"({"t": {"dtype": "F32", "shape": [1099511627776, 4194304], "data_offsets": [0, 0]}})");
  EXPECT_NE(big.find("implausibly large"), std::string::npos) << big;
  // A dtype nested 200,000 levels deep: an error message, not a stack overflow printing it.
  const std::string deep = read_error(R"({"t": {"dtype": )" + std::string(200000, '[') + std::string(200000, ']') +
                                      R"(, "shape": [1], "data_offsets": [0, 4]}})");
  EXPECT_NE(deep.find("unsupported dtype of type array"), std::string::npos) << deep.substr(0, 200);
}

}  // namespace
}  // namespace radixlm::formats
