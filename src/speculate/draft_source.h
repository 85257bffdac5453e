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
enum class Origin { kContext, kSuffix, kRadix };
inline constexpr int kOrigins = 3;
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

// The draft length of one sequence, adapted to what it accepted: doubles after a fully
// accepted draft, shrinks to what was accepted plus one after a partial one; a draft of which
// nothing was accepted raises the match length the next draft needs (text that does not
// repeat stops drafting), an accepted one lowers it again.
class DraftLength {
 public:
  DraftLength(int max, int min_match) : max_(max), k_(std::min(max, 4)), floor_(min_match), min_match_(min_match) {}
  int length() const { return k_; }
  int min_match() const { return min_match_; }
  void Update(int drafted, int accepted);

 private:
  int max_, k_, floor_, min_match_;
};

// Candidate places for a draft: the positions right after an occurrence of the context's
// suffix, in one text, with the suffix length that occurrence shares.
struct Place {
  std::span<const int32_t> text;
  int64_t next = 0;  // text[next] is the first continuation token
  int match = 0;
};

// The last `want` places (most recent first) in `text` [0, end) where the final tokens of
// `context` occur with at least `min_match` tokens matched (at most `max_match` compared).
// text may be the context itself (then end = its size - 1 excludes the trivial match).
void FindPlaces(std::span<const int32_t> context, std::span<const int32_t> text, int64_t end, int min_match,
                int max_match, int want, std::vector<Place>* out);

// SuffixDecoding's greedy path: from the places sharing the longest match, the most frequent
// next token (ties: the earliest place in `places`, i.e. the most recent), keeping the places
// that agree, while the path's probability (the product of the chosen tokens' shares) stays at
// or above `min_score`. Appends up to max_tokens ids.
void FrequentPath(std::span<const Place> places, int max_tokens, double min_score, std::vector<int32_t>* out);

}  // namespace radixlm::speculate
