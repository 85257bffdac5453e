// The scoring runner (embeddings, yes/no reranking) with and without intra-batch prefix dedup,
// its packing, and the request queue that merges concurrent requests.
#include "runner/scoring.h"

#include <gtest/gtest.h>

#include <cmath>
#include <new>

#include "core/random.h"
#include "models/loader.h"
#include "runner/scoring_queue.h"

namespace radixlm::runner {
namespace {

using Seqs = std::vector<std::vector<int32_t>>;

// Random batches with random sharing: an instruction every input starts with, some inputs
// repeating a longer stem, suffixes of random lengths (some inputs identical).
Seqs RandomBatch(core::Rng& rng, int64_t vocab) {
  auto tokens = [&](int n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng.Below(vocab));
    return t;
  };
  const std::vector<int32_t> instruction = tokens(5 + static_cast<int>(rng.Below(30)));
  const std::vector<int32_t> stem = tokens(static_cast<int>(rng.Below(20)));
  Seqs out;
  const int n = 2 + static_cast<int>(rng.Below(9));
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> s = rng.Below(5) == 0 ? std::vector<int32_t>{} : instruction;
    if (rng.Below(2)) s.insert(s.end(), stem.begin(), stem.end());
    const auto tail = tokens(1 + static_cast<int>(rng.Below(25)));
    s.insert(s.end(), tail.begin(), tail.end());
    out.push_back(s);
    if (rng.Below(4) == 0) out.push_back(s);  // an exact duplicate
  }
  return out;
}

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

class ScoringTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = models::LoadModel("random:tiny").value().release(); }
  static void TearDownTestSuite() { delete model_; }
  static models::Transformer* model_;
};
models::Transformer* ScoringTest::model_ = nullptr;

TEST_F(ScoringTest, CompactionNeverChangesEmbeddingsOrScores) {
  core::ThreadPool pool(2);
  core::Rng rng(21);
  int64_t saved = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const Seqs batch = RandomBatch(rng, model_->config().vocab_size);
    const int64_t budget = trial % 2 ? 4096 : 64;  // one forward, or several packed ones
    ScoringRunner plain(*model_, pool, {.max_batch_tokens = budget, .threshold = 0});
    const auto e_plain_last = plain.Embed(batch, Pooling::kLastToken, true).value();
    const auto e_plain_mean = plain.Embed(batch, Pooling::kMean, false).value();
    const auto s_plain = plain.YesNoLogits(batch, 3, 7).value();
    for (const bool trie : {true, false}) {
      ScoringRunner compact(*model_, pool, {.max_batch_tokens = budget, .threshold = 1.0, .trie_attention = trie});
      const auto e_last = compact.Embed(batch, Pooling::kLastToken, true).value();
      const auto e_mean = compact.Embed(batch, Pooling::kMean, false).value();
      const auto s = compact.YesNoLogits(batch, 3, 7).value();
      for (size_t i = 0; i < batch.size(); ++i) {
        // Bitwise: every kernel computes rows independently.
        EXPECT_EQ(e_last[i], e_plain_last[i]) << "trial " << trial << " input " << i << " trie " << trie;
        EXPECT_EQ(e_mean[i], e_plain_mean[i]) << "trial " << trial << " input " << i << " trie " << trie;
        EXPECT_GT(Cosine(e_mean[i], e_plain_mean[i]), 0.99999);
        EXPECT_EQ(s[i], s_plain[i]);
      }
      saved += compact.stats().original_rows - compact.stats().computed_rows;
    }
  }
  EXPECT_GT(saved, 0);
}

TEST_F(ScoringTest, EmbeddingsEqualEachInputRunAloneAndAreNormalised) {
  core::ThreadPool pool(2);
  core::Rng rng(5);
  const Seqs batch = RandomBatch(rng, model_->config().vocab_size);
  ScoringRunner batched(*model_, pool, {.threshold = 0.92});
  const auto all = batched.Embed(batch, Pooling::kLastToken, true).value();
  ScoringRunner single(*model_, pool, {.threshold = 0});
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto one = single.Embed(Seqs{batch[i]}, Pooling::kLastToken, true).value();
    EXPECT_EQ(one[0], all[i]);
    double norm = 0;
    for (float x : all[i]) norm += double(x) * x;
    EXPECT_NEAR(norm, 1.0, 1e-6);
  }
}

TEST_F(ScoringTest, PackingRespectsTheComputedRowBudget) {
  core::ThreadPool pool(2);
  // 16 inputs = a 48-token shared prefix + 8 own tokens: compacted, one forward of 176 rows
  // fits a 200-row budget; uncompacted they need 896 rows, so 4 forwards of at most 200.
  Seqs batch;
  for (int i = 0; i < 16; ++i) {
    std::vector<int32_t> s(48, 11);
    for (int k = 0; k < 8; ++k) s.push_back(100 + i * 8 + k);
    batch.push_back(s);
  }
  ScoringRunner compact(*model_, pool, {.max_batch_tokens = 200, .threshold = 0.92});
  ASSERT_TRUE(compact.YesNoLogits(batch, 1, 2).ok());
  EXPECT_EQ(compact.stats().forwards, 1);
  EXPECT_EQ(compact.stats().computed_rows, 48 + 16 * 8);
  ScoringRunner plain(*model_, pool, {.max_batch_tokens = 200, .threshold = 0});
  ASSERT_TRUE(plain.YesNoLogits(batch, 1, 2).ok());
  EXPECT_EQ(plain.stats().forwards, 6);  // 3 inputs (168 rows) per forward
  EXPECT_EQ(plain.stats().computed_rows, 16 * 56);
}

TEST_F(ScoringTest, DuplicateInputsAreReadOutOnce) {
  // Equal inputs whose length fills whole blocks cost a trie-compacted forward nothing, so
  // thousands of them share one forward; their outputs must not grow with their number.
  core::ThreadPool pool(2);
  const std::vector<int32_t> input = {5, 9, 2, 7, 1, 8, 3, 6, 4, 10, 12, 14, 16, 18, 20, 22,
                                      11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31, 33, 35, 37, 39, 41};
  const Seqs batch(3000, input);
  ScoringRunner alone(*model_, pool, {.threshold = 0});
  const double score = alone.YesNoLogits(Seqs{input}, 3, 7).value()[0];
  const std::vector<float> mean = alone.Embed(Seqs{input}, Pooling::kMean, true).value()[0];
  ScoringRunner compact(*model_, pool, {.max_batch_tokens = 64, .threshold = 1.0, .trie_attention = true});
  const auto scores = compact.YesNoLogits(batch, 3, 7).value();
  EXPECT_EQ(compact.stats().forwards, 1);
  EXPECT_EQ(compact.stats().computed_rows, 32);
  EXPECT_EQ(compact.stats().output_rows, 1) << "one logits row for 3,000 equal inputs";
  for (double s : scores) ASSERT_EQ(s, score);
  const auto means = compact.Embed(batch, Pooling::kMean, true).value();
  EXPECT_EQ(compact.stats().output_rows, 1 + 32) << "mean pooling reads each computed row once";
  for (const auto& m : means) ASSERT_EQ(m, mean);
}

TEST_F(ScoringTest, BadInputsAreRejectedClearly) {
  core::ThreadPool pool(1);
  ScoringRunner r(*model_, pool, {.max_batch_tokens = 32});
  EXPECT_EQ(r.Embed(Seqs{{}}, Pooling::kMean, true).status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Embed(Seqs{std::vector<int32_t>(33, 1)}, Pooling::kMean, true).status().code(),
            core::StatusCode::kOutOfRange);
  EXPECT_EQ(r.YesNoLogits(Seqs{{1, 2, -4}}, 1, 2).status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.YesNoLogits(Seqs{{1, 2}}, 1, 1 << 30).status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.stats().forwards, 0) << "nothing computed for a rejected request";
}

TEST_F(ScoringTest, QueueMergesConcurrentRequestsAndIsolatesBadOnes) {
  core::ThreadPool pool(2);
  core::Rng rng(8);
  std::vector<Seqs> jobs;
  for (int j = 0; j < 6; ++j) jobs.push_back(RandomBatch(rng, model_->config().vocab_size));
  jobs[3] = Seqs{{1, 2}, {}};  // invalid: an empty input
  ScoringRunner reference(*model_, pool, {.threshold = 0});
  // The worker takes job 0 alone and then builds its runner; the factory holds it there until
  // jobs 1-5 are queued, so they (all of one kind) form the second batch together.
  std::promise<void> first_taken, all_submitted;
  std::shared_future<void> submitted = all_submitted.get_future().share();
  ScoringQueue queue(
      [&, submitted] {
        first_taken.set_value();
        submitted.wait();
        return std::make_unique<ScoringRunner>(*model_, pool, ScoringConfig{.threshold = 0.92});
      },
      8192);
  std::vector<std::future<core::StatusOr<ScoringResult>>> futures;
  for (const Seqs& j : jobs) {
    ScoringJob job;
    job.kind = ScoringJob::Kind::kYesNo;
    job.yes_id = 3;
    job.no_id = 7;
    job.inputs = j;
    futures.push_back(queue.Submit(std::move(job)));
    if (futures.size() == 1) first_taken.get_future().wait();
  }
  all_submitted.set_value();
  for (size_t j = 0; j < jobs.size(); ++j) {
    auto r = futures[j].get();
    if (j == 3) {
      EXPECT_FALSE(r.ok());
      continue;
    }
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->logits, reference.YesNoLogits(jobs[j], 3, 7).value()) << "job " << j;
  }
  EXPECT_EQ(queue.stats().jobs, 6);
  EXPECT_EQ(queue.stats().batches, 2);
  EXPECT_EQ(queue.stats().merged_jobs, 5);
}

TEST_F(ScoringTest, QueueFailsABatchThatCannotRunAndGoesOn) {
  core::ThreadPool pool(1);
  int made = 0;
  ScoringQueue queue(
      [&]() -> std::unique_ptr<ScoringRunner> {
        if (made++ == 0) throw std::bad_alloc();  // the first runner's KV store is refused
        return std::make_unique<ScoringRunner>(*model_, pool, ScoringConfig{.threshold = 0.92});
      },
      8192);
  auto job = [] {
    ScoringJob j;
    j.kind = ScoringJob::Kind::kYesNo;
    j.yes_id = 3;
    j.no_id = 7;
    j.inputs = Seqs{{1, 2, 3}};
    return j;
  };
  const auto refused = queue.Submit(job()).get();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), core::StatusCode::kResourceExhausted);
  const auto served = queue.Submit(job()).get();
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  EXPECT_EQ(served->logits.size(), 1u);
}

}  // namespace
}  // namespace radixlm::runner
