// Draft sources for speculative decoding without a draft model: what a sequence will probably
// say next, read from text the engine has already seen. The engine appends a draft to a
// decoding sequence, computes the draft's rows in the same step as the sequence's next token,
// and keeps the drafted tokens the model itself produces (engine/engine.h); a source only
// proposes, so no source can change an answer, only how many steps it takes.
//
// Sources, as rows of one table (Sources(); `--speculate NAME`):
//   ngram  prompt lookup (vLLM's n-gram proposer, llama.cpp's lookup): the latest earlier place
//          in the sequence's own tokens (prompt and output) where its last tokens occurred, and
//          what followed there.
//   tree   the same candidates from the sequence itself, plus what followed the same context
//          elsewhere: the radix prefix cache (an exact continuation of the whole context a
//          previous request took) and a bounded suffix index over recent sequences of every
//          request (SuffixDecoding, Oliaro et al. 2024): all places where the longest suffix of
//          the context occurred, extended token by token with the most frequent continuation
//          while its share of the surviving places stays high.
//
// Contract of a source: Propose is called on the engine thread, between steps, with the
// sequence's tokens so far; it appends at most q.max_tokens ids (any ids in the vocabulary) and
// says where they came from. It must be cheap (microseconds per call): it runs once per
// decoding sequence per step. Finished() hands it every finished sequence (prompt + output).
// Candidates never cross cache namespaces (tenants): a tenant's text never drafts another's.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace radixlm::cache {
class RadixTree;
}

namespace radixlm::speculate {

// Where a draft came from (counted separately: acceptance differs a lot between them).
// A new origin is one enumerator and one row of kOriginNames (draft_source.cc); kOrigins follows.
enum class Origin { kContext, kSuffix, kRadix, kCount };
inline constexpr int kOrigins = static_cast<int>(Origin::kCount);
const char* OriginName(Origin o);

struct DraftQuery {
  std::span<const int32_t> tokens;  // prompt + output so far (no draft)
  int64_t prompt_len = 0;
  int64_t ns = 0;                   // cache namespace
  int max_tokens = 0;               // propose at most this many
  // The shortest suffix of `tokens` a candidate place must share (DraftLength raises it after
  // misses, so text that does not repeat stops paying for drafts).
  int min_match = 2;
};

struct Draft {
  std::vector<int32_t> tokens;
  Origin origin = Origin::kContext;
  int match = 0;  // the context suffix length the draft was found by (0: none)
};

class DraftSource {
 public:
  virtual ~DraftSource() = default;
  virtual void Propose(const DraftQuery& q, Draft* out) = 0;
  virtual void Finished(std::span<const int32_t> /*tokens*/, int64_t /*ns*/) {}
};

struct SourceContext {
  const cache::RadixTree* tree = nullptr;  // borrowed; null: no radix continuations
  int64_t suffix_index_tokens = 1 << 20;   // the suffix index's bound (tokens kept)
};

struct SourceRow {
  std::string_view name;
  std::string_view help;
  std::unique_ptr<DraftSource> (*make)(const SourceContext&);
};
// The sources `--speculate` names ("off" has no row).
std::span<const SourceRow> Sources();
// "off" gives null; an unknown name an InvalidArgument listing the choices.
core::StatusOr<std::unique_ptr<DraftSource>> MakeSource(std::string_view name, const SourceContext& context);

// What one sequence's drafts have been worth: the probability that a draft token is accepted
// (an average over the recent verifications, each accepted token a success and the first
// rejected one a failure), and the match length its next draft needs (raised by a draft of
// which nothing was accepted, so text that does not repeat stops drafting; lowered again by an
// accepted one). Steps without a draft let the estimate drift back towards the prior, so a
// sequence that starts repeating itself later is tried again.
class DraftPolicy {
 public:
  explicit DraftPolicy(int min_match, double prior = 0.6) : floor_(min_match), min_match_(min_match), prior_(prior), p_(prior) {}
  double acceptance() const { return p_; }
  int min_match() const { return min_match_; }
  void Verified(int drafted, int accepted);
  void Skipped();

 private:
  int floor_, min_match_;
  double prior_, p_;
};

// How often draft tokens were accepted, by the length of the context match that found the
// draft (SuffixDecoding scores a draft by such statistics): a draft found by a long match is
// usually right, one found by a two-token match often is not. Learned from every
// verification of the engine (per-token acceptance, as DraftPolicy counts it), from a prior
// that rises with the match length (0.3 for one token to 0.9 for 16 or more).
class AcceptanceByMatch {
 public:
  double Estimate(int match) const;
  void Observe(int match, int drafted, int accepted);

 private:
  static int Bucket(int match);  // 1, 2, 3, 4-5, 6-8, 9-15, 16+ (0: unknown)
  std::array<double, 8> success_{}, trials_{};
};

// A step's duration by the rows it computes, learned from the steps the engine runs (an
// average per row count). A row count never seen is estimated optimistically, so that it gets
// tried and measured: from the largest seen count below it with a prior slope (a tenth of one
// row's step per row), or the line to the next seen count where that is cheaper.
class StepCost {
 public:
  static constexpr int kMaxRows = 256;
  void Observe(int64_t rows, double seconds);
  double Seconds(int64_t rows) const;  // 0 before any step was seen
  bool known() const { return !seen_.empty(); }

 private:
  std::vector<double> mean_ = std::vector<double>(kMaxRows + 1, 0.0);
  std::vector<int> count_ = std::vector<int>(kMaxRows + 1, 0);
  std::vector<int> seen_;  // row counts observed, ascending
};

// 1 + p + ... + p^k: the tokens a step yields for a draft of k tokens each accepted with
// probability p (the first rejection ends it; the model's own next token always comes).
double ExpectedTokens(double p, int k);

// The draft length (0 .. k_max) that maximises a step's tokens per second when the step
// already computes `rows` rows yielding `tokens` tokens (this sequence's own next row and
// token included): (tokens - 1 + ExpectedTokens(p, k)) / cost(rows + k), where a draft must
// beat none by 1%. Without a measured cost, k_max.
int BestDraftLength(double p, int k_max, int64_t rows, double tokens, const StepCost& cost);

// Candidate places for a draft: the positions right after an occurrence of the context's
// suffix, in one text, with the suffix length that occurrence shares.
struct Place {
  std::span<const int32_t> text;
  int64_t next = 0;  // text[next] is the first continuation token
  int match = 0;
  // The text is the context itself: a continuation that runs into its end goes on with the
  // draft being made (a copy that overlaps itself, as LZ77's: a loop of period p drafts whole
  // periods, not just the p tokens before the end).
  bool overlaps = false;
};
// The token at `depth` of place p's continuation, given the draft so far (-1: none).
int32_t ContinuationAt(const Place& p, int64_t depth, std::span<const int32_t> draft);

// The last `want` places (most recent first) in `text` [0, end) where the final tokens of
// `context` occur with at least `min_match` tokens matched (at most `max_match` compared).
// text may be the context itself (then end = its size - 1 excludes the trivial match, and the
// places overlap: Place::overlaps).
void FindPlaces(std::span<const int32_t> context, std::span<const int32_t> text, int64_t end, int min_match,
                int max_match, int want, std::vector<Place>* out);

// SuffixDecoding's greedy path: from the places sharing the longest match, the most frequent
// next token (ties: the earliest place in `places`, i.e. the most recent), keeping the places
// that agree, while the path's probability (the product of the chosen tokens' shares) stays at
// or above `min_score`. Appends up to max_tokens ids.
void FrequentPath(std::span<const Place> places, int max_tokens, double min_score, std::vector<int32_t>* out);

}  // namespace radixlm::speculate
