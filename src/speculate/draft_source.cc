#include "speculate/draft_source.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>

#include "cache/radix_tree.h"
#include "speculate/suffix_index.h"

namespace radixlm::speculate {

// By Origin, in its order.
constexpr const char* kOriginNames[] = {"context", "suffix", "radix"};
static_assert(std::size(kOriginNames) == kOrigins, "one name per speculate::Origin");

const char* OriginName(Origin o) {
  const int i = static_cast<int>(o);
  return i >= 0 && i < kOrigins ? kOriginNames[i] : "?";
}

void DraftPolicy::Verified(int drafted, int accepted) {
  if (drafted <= 0) return;
  constexpr double kRate = 0.15;  // weight of one trial in the average
  for (int i = 0; i < accepted; ++i) p_ += kRate * (1.0 - p_);
  if (accepted < drafted) p_ -= kRate * p_;
  if (accepted == 0) min_match_ = std::min(min_match_ + 1, 8);
  else min_match_ = std::max(floor_, min_match_ - 1);
}

void DraftPolicy::Skipped() { p_ += 0.02 * (prior_ - p_); }

int AcceptanceByMatch::Bucket(int match) {
  if (match <= 0) return 0;
  if (match <= 3) return match;
  if (match <= 5) return 4;
  if (match <= 8) return 5;
  return match <= 15 ? 6 : 7;
}

double AcceptanceByMatch::Estimate(int match) const {
  // The prior (worth 4 trials): the longer the match, the likelier the draft, so an unseen
  // long match is tried (looping or copied text) while short ones must earn it.
  static constexpr std::array<double, 8> kPrior = {0.3, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9};
  const int b = Bucket(match);
  return (success_[b] + 4.0 * kPrior[b]) / (trials_[b] + 4.0);
}

void AcceptanceByMatch::Observe(int match, int drafted, int accepted) {
  if (drafted <= 0) return;
  const int b = Bucket(match);
  // Recent verifications weigh more: the counts decay once they pass a few hundred trials.
  if (trials_[b] > 512) success_[b] *= 0.5, trials_[b] *= 0.5;
  success_[b] += accepted;
  trials_[b] += accepted + (accepted < drafted ? 1 : 0);
}

void StepCost::Observe(int64_t rows, double seconds) {
  if (rows < 1 || rows > kMaxRows || !(seconds > 0)) return;
  const size_t r = static_cast<size_t>(rows);
  if (count_[r] == 0) seen_.insert(std::lower_bound(seen_.begin(), seen_.end(), static_cast<int>(rows)), static_cast<int>(rows));
  // A running mean over the first 8 steps, then an exponential average (machines change pace).
  count_[r] = std::min(count_[r] + 1, 8);
  mean_[r] += (seconds - mean_[r]) / count_[r];
}

double StepCost::Seconds(int64_t rows) const {
  if (seen_.empty()) return 0;
  rows = std::clamp<int64_t>(rows, 1, kMaxRows);
  const auto hi = std::lower_bound(seen_.begin(), seen_.end(), static_cast<int>(rows));
  if (hi != seen_.end() && *hi == rows) return mean_[static_cast<size_t>(rows)];
  const double unit = mean_[static_cast<size_t>(seen_.front())] / seen_.front();  // one row's share, for the prior slope
  if (hi == seen_.begin()) return mean_[static_cast<size_t>(*hi)] * rows / *hi;
  const int a = *(hi - 1);
  if (hi == seen_.end()) return mean_[static_cast<size_t>(a)] + 0.1 * unit * static_cast<double>(rows - a);
  // Between two seen counts: the straight line, unless the prior slope from below is cheaper
  // (a step's cost is flat while the weights' read hides the rows, then steep: a line from 1
  // row to 9 overstates 3 rows, which would then never be tried and measured).
  const int b = *hi;
  const double line = mean_[static_cast<size_t>(a)] +
                      (mean_[static_cast<size_t>(b)] - mean_[static_cast<size_t>(a)]) * double(rows - a) / (b - a);
  return std::min(line, mean_[static_cast<size_t>(a)] + 0.1 * unit * static_cast<double>(rows - a));
}

double ExpectedTokens(double p, int k) {
  double e = 1, term = 1;
  for (int i = 0; i < k; ++i) e += term *= p;
  return e;
}

int BestDraftLength(double p, int k_max, int64_t rows, double tokens, const StepCost& cost) {
  if (!cost.known()) return k_max;
  // A draft must promise at least 1% over none: rows also cost what the average hides
  // (a rollback, a recurrent model's recomputed rows, noise in the measured costs).
  int best = 0;
  double best_rate = 1.01 * tokens / cost.Seconds(rows);
  for (int k = 1; k <= k_max; ++k) {
    const double rate = (tokens - 1 + ExpectedTokens(p, k)) / cost.Seconds(rows + k);
    if (rate > best_rate) best = k, best_rate = rate;
  }
  return best;
}

int32_t ContinuationAt(const Place& p, int64_t depth, std::span<const int32_t> draft) {
  const int64_t i = p.next + depth, n = static_cast<int64_t>(p.text.size());
  if (i < n) return p.text[static_cast<size_t>(i)];
  if (p.overlaps && i - n < static_cast<int64_t>(draft.size())) return draft[static_cast<size_t>(i - n)];
  return -1;
}

void FindPlaces(std::span<const int32_t> context, std::span<const int32_t> text, int64_t end, int min_match,
                int max_match, int want, std::vector<Place>* out) {
  const int64_t n = static_cast<int64_t>(context.size());
  if (n == 0 || want <= 0 || min_match < 1) return;
  const int32_t last = context.back();
  const size_t first = out->size();
  int longest = 0;  // the places found with max_match stop the scan once `want` of them are in
  for (int64_t j = std::min<int64_t>(end, static_cast<int64_t>(text.size())) - 1; j >= 0 && longest < want; --j) {
    if (text[static_cast<size_t>(j)] != last) continue;
    int m = 1;
    while (m < max_match && m < n && m <= j && text[static_cast<size_t>(j - m)] == context[static_cast<size_t>(n - 1 - m)]) ++m;
    if (m < min_match) continue;
    out->push_back({text, j + 1, m, text.data() == context.data() && text.size() == context.size()});
    longest += m == max_match;
  }
  // Longest match first, the most recent first among equals; keep `want`.
  std::stable_sort(out->begin() + static_cast<int64_t>(first), out->end(),
                   [](const Place& a, const Place& b) { return a.match > b.match; });
  if (out->size() - first > static_cast<size_t>(want)) out->resize(first + static_cast<size_t>(want));
}

void FrequentPath(std::span<const Place> places, int max_tokens, double min_score, std::vector<int32_t>* out) {
  if (places.empty()) return;
  const size_t first = out->size();
  auto draft = [&] { return std::span<const int32_t>(out->data() + first, out->size() - first); };
  const int best = std::max_element(places.begin(), places.end(), [](const Place& a, const Place& b) { return a.match < b.match; })->match;
  std::vector<const Place*> alive;
  for (const Place& p : places)
    if (p.match == best) alive.push_back(&p);
  double score = 1.0;
  std::unordered_map<int32_t, std::pair<int, int>> counts;  // token -> (places, first place)
  for (int d = 0; d < max_tokens && !alive.empty(); ++d) {
    counts.clear();
    for (int i = 0; i < static_cast<int>(alive.size()); ++i) {
      const int32_t t = ContinuationAt(*alive[static_cast<size_t>(i)], d, draft());
      if (t < 0) continue;
      auto [it, added] = counts.try_emplace(t, 0, i);
      ++it->second.first;
    }
    if (counts.empty()) break;
    auto top = counts.begin();
    for (auto it = counts.begin(); it != counts.end(); ++it)
      if (it->second.first > top->second.first || (it->second.first == top->second.first && it->second.second < top->second.second))
        top = it;
    score *= double(top->second.first) / double(alive.size());
    if (score < min_score) break;
    const int32_t token = top->first;
    std::erase_if(alive, [&](const Place* p) { return ContinuationAt(*p, d, draft()) != token; });
    out->push_back(token);
  }
}

namespace {

constexpr int kMaxMatch = 24;  // context tokens compared per place (a longer match ranks no higher)

// Prompt lookup: the longest (then the latest) earlier occurrence of the context's suffix in
// the sequence itself; its continuation, as far as asked.
class NgramSource : public DraftSource {
 public:
  void Propose(const DraftQuery& q, Draft* out) override {
    places_.clear();
    FindPlaces(q.tokens, q.tokens, static_cast<int64_t>(q.tokens.size()) - 1, q.min_match, kMaxMatch, 1, &places_);
    if (places_.empty()) return;
    const Place& p = places_.front();
    for (int64_t d = 0; static_cast<int>(out->tokens.size()) < q.max_tokens; ++d) {
      const int32_t t = ContinuationAt(p, d, out->tokens);
      if (t < 0) break;
      out->tokens.push_back(t);
    }
    out->origin = Origin::kContext;
    out->match = p.match;
  }

 private:
  std::vector<Place> places_;
};

// The radix tree's exact continuation of the whole context, else SuffixDecoding's frequency
// path over the places in the sequence itself and in the suffix index of recent sequences.
class TreeSource : public DraftSource {
 public:
  explicit TreeSource(const SourceContext& c) : tree_(c.tree), index_(c.suffix_index_tokens) {}

  void Propose(const DraftQuery& q, Draft* out) override {
    if (tree_) {
      tree_->Continuation(q.tokens, q.ns, q.max_tokens, &out->tokens);
      if (!out->tokens.empty()) {
        out->origin = Origin::kRadix;
        out->match = static_cast<int>(std::min<size_t>(q.tokens.size(), 1 << 30));
        return;
      }
    }
    places_.clear();
    FindPlaces(q.tokens, q.tokens, static_cast<int64_t>(q.tokens.size()) - 1, q.min_match, kMaxMatch, kWant, &places_);
    const size_t own = places_.size();
    index_.Find(q.tokens, q.ns, q.min_match, kMaxMatch, kWant, &places_);
    if (places_.empty()) return;
    FrequentPath(places_, q.max_tokens, kMinScore, &out->tokens);
    // Attributed to the best-ranked place's text: the sequence itself or the index.
    const auto best = std::max_element(places_.begin(), places_.end(), [](const Place& a, const Place& b) { return a.match < b.match; });
    out->origin = static_cast<size_t>(best - places_.begin()) < own ? Origin::kContext : Origin::kSuffix;
    out->match = best->match;
  }

  void Finished(std::span<const int32_t> tokens, int64_t ns) override { index_.Add(tokens, ns); }

 private:
  static constexpr int kWant = 16;
  static constexpr double kMinScore = 0.3;
  const cache::RadixTree* tree_;
  SuffixIndex index_;
  std::vector<Place> places_;
};

std::unique_ptr<DraftSource> MakeNgram(const SourceContext&) { return std::make_unique<NgramSource>(); }
std::unique_ptr<DraftSource> MakeTree(const SourceContext& c) { return std::make_unique<TreeSource>(c); }

constexpr SourceRow kSources[] = {
    {"ngram", "prompt lookup: what followed the context's last tokens earlier in the same sequence", MakeNgram},
    {"tree", "the radix cache's continuation of the whole context, else the most frequent continuation of its "
             "suffix in the sequence and in recent sequences (SuffixDecoding)", MakeTree},
};

}  // namespace

std::span<const SourceRow> Sources() { return kSources; }

core::StatusOr<std::unique_ptr<DraftSource>> MakeSource(std::string_view name, const SourceContext& context) {
  if (name == "off") return std::unique_ptr<DraftSource>();
  std::string names = "off";
  for (const SourceRow& row : kSources) {
    if (row.name == name) return row.make(context);
    names += ", " + std::string(row.name);
  }
  return core::InvalidArgument("unknown --speculate source '" + std::string(name) + "' (" + names + ")");
}

}  // namespace radixlm::speculate
