// CompiledGrammar's token mask cache and the per-sequence Matcher (matcher.h).
#include "grammar/matcher.h"

#include <algorithm>
#include <map>
#include <queue>

#include "grammar/json_schema.h"

namespace radixlm::grammar {
namespace {

void SetBit(std::span<uint32_t> bits, int32_t id) { bits[id >> 5] |= 1u << (id & 31); }
bool GetBit(std::span<const uint32_t> bits, int32_t id) { return (bits[id >> 5] >> (id & 31)) & 1; }

// Parser states over one persistent (hash-consing) arena, interned as sorted top-id lists, with
// their byte transitions computed on first use: a DFA built lazily while a walk needs it.
class StateDfa {
 public:
  // Start state: the stack of positions `chain` (bottom first) above the sentinel `bottom`.
  StateDfa(const ByteGrammar& g, const std::vector<int32_t>& chain, int32_t bottom) : g_(g), arena_(/*persistent=*/true) {
    arena_.BeginStep();
    int32_t node = bottom;
    for (int32_t p : chain) node = arena_.Make(p, node);
    Intern({node});
  }
  bool Alive(int32_t state) const { return !states_[state].empty(); }
  // The state after byte b; *flags: bit 0 the root completed, bit 1 the boundary popped. -1
  // when computing it would burn more than *fuel.
  int32_t Step(int32_t from, uint8_t b, uint8_t* flags, int64_t* fuel) {
    if (next_[from][b] < 0) {
      arena_.Refuel(*fuel);
      const StepFlags f = StepByte(g_, arena_, states_[from], b, &scratch_);
      *fuel = arena_.fuel();
      if (arena_.exhausted()) return -1;
      std::sort(scratch_.begin(), scratch_.end());
      const int32_t to = Intern(scratch_);
      next_[from][b] = to;
      flags_[from][b] = static_cast<uint8_t>((f.completed ? 1 : 0) | (f.boundary ? 2 : 0));
    }
    *flags = flags_[from][b];
    return next_[from][b];
  }

 private:
  int32_t Intern(const std::vector<int32_t>& tops) {
    auto [it, inserted] = ids_.emplace(tops, static_cast<int32_t>(states_.size()));
    if (inserted) {
      states_.push_back(tops);
      next_.emplace_back().fill(-1);
      flags_.emplace_back();
    }
    return it->second;
  }
  const ByteGrammar& g_;
  StackArena arena_;
  std::vector<std::vector<int32_t>> states_;
  std::map<std::vector<int32_t>, int32_t> ids_;
  std::vector<std::array<int32_t, 256>> next_;
  std::vector<std::array<uint8_t, 256>> flags_;
  std::vector<int32_t> scratch_;
};

}  // namespace

CompiledGrammar::CompiledGrammar(ByteGrammar g, std::string gbnf, std::shared_ptr<const Vocabulary> vocab)
    : g_(std::move(g)), gbnf_(std::move(gbnf)), vocab_(std::move(vocab)) {
  ComputeShortest();
}

void CompiledGrammar::ComputeShortest() {
  constexpr int64_t kLong = kNoText - 1;  // finite, saturated
  const size_t n = g_.alternatives.size();
  // Every alternative: its rule, its bytes so far plus its resolved references, and how many
  // references are unresolved. An empty byte set makes it dead for good.
  struct Alt {
    int32_t rule, start;
    int64_t len = 0;
    int32_t unresolved = 0;
    bool dead = false;
  };
  std::vector<Alt> alts;
  std::vector<std::vector<int32_t>> users(n);  // per rule: the alternatives referencing it
  for (size_t r = 0; r < n; ++r) {
    for (int32_t start : g_.alternatives[r]) {
      Alt a{static_cast<int32_t>(r), start};
      for (int32_t p = start; g_.elems[p].kind != ByteGrammar::Kind::kEnd; ++p) {
        if (g_.elems[p].kind == ByteGrammar::Kind::kRef) {
          ++a.unresolved;
          users[g_.elems[p].arg].push_back(static_cast<int32_t>(alts.size()));
          continue;
        }
        const auto& set = g_.sets[g_.elems[p].arg];
        a.dead |= (set[0] | set[1] | set[2] | set[3]) == 0;
        a.len = std::min(a.len + 1, kLong);
      }
      alts.push_back(a);
    }
  }
  using Item = std::pair<int64_t, int32_t>;  // (length, alternative): shortest first, then first written
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
  for (size_t i = 0; i < alts.size(); ++i)
    if (alts[i].unresolved == 0 && !alts[i].dead) ready.push({alts[i].len, static_cast<int32_t>(i)});
  shortest_len_.assign(n, kNoText);
  shortest_start_.assign(n, -1);
  while (!ready.empty()) {
    const auto [len, i] = ready.top();
    ready.pop();
    const int32_t r = alts[i].rule;
    if (shortest_start_[r] >= 0) continue;  // settled by a shorter (or earlier) alternative
    shortest_len_[r] = len;
    shortest_start_[r] = alts[i].start;
    for (int32_t u : users[r]) {
      Alt& a = alts[u];
      a.len = std::min(a.len + len, kLong);
      if (--a.unresolved == 0 && !a.dead) ready.push({a.len, u});
    }
  }
  // Drop what can never complete: an alternative with an empty set or a reference to a rule
  // without text. Every stack the matcher keeps alive can then still finish.
  size_t k = 0;
  for (size_t r = 0; r < n; ++r) {
    std::vector<int32_t> live;
    for (int32_t start : g_.alternatives[r]) {
      const Alt& a = alts[k++];
      if (!a.dead && a.unresolved == 0) live.push_back(start);
    }
    g_.alternatives[r] = std::move(live);
  }
}

int64_t CompiledGrammar::ShortestFrom(int32_t pos) const {
  int64_t len = 0;
  for (int32_t p = pos; g_.elems[p].kind != ByteGrammar::Kind::kEnd && len < kNoText; ++p) {
    len += g_.elems[p].kind == ByteGrammar::Kind::kBytes ? 1 : shortest_len_[g_.elems[p].arg];
  }
  return std::min(len, kNoText);
}

bool CompiledGrammar::AppendShortestFrom(int32_t pos, std::string* out, size_t max_bytes) const {
  const int64_t len = ShortestFrom(pos);
  if (len >= kNoText - 1 || out->size() + static_cast<uint64_t>(len) > max_bytes) return false;
  // Iterative (a chain of rules is as deep as the grammar is long): the rest of an alternative
  // waits on the stack while a referenced rule's shortest alternative is written.
  std::vector<int32_t> stack = {pos};
  while (!stack.empty()) {
    int32_t p = stack.back();
    stack.pop_back();
    for (; g_.elems[p].kind != ByteGrammar::Kind::kEnd; ++p) {
      if (g_.elems[p].kind == ByteGrammar::Kind::kRef) {
        stack.push_back(p + 1);
        stack.push_back(shortest_start_[g_.elems[p].arg]);
        break;
      }
      const auto& set = g_.sets[g_.elems[p].arg];
      for (int b = 0; b < 256; ++b) {
        if ((set[b >> 6] >> (b & 63)) & 1) {
          out->push_back(static_cast<char>(b));
          break;
        }
      }
    }
  }
  return true;
}

core::StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::FromGbnf(
    std::string_view gbnf, std::shared_ptr<const Vocabulary> vocab, std::string_view root) {
  auto parsed = ParseGbnf(gbnf, root);
  if (!parsed.ok()) return parsed.status();
  auto g = std::make_shared<const CompiledGrammar>(ByteGrammar::Lower(*parsed), std::string(gbnf), std::move(vocab));
  if (!g->nonempty())
    return core::InvalidArgument("grammar: rule '" + std::string(root) + "' matches no text (its language is empty)");
  return g;
}

core::StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::FromJsonSchema(
    std::string_view schema_json, std::shared_ptr<const Vocabulary> vocab) {
  std::string gbnf;
  auto g = JsonSchemaToGrammar(schema_json, &gbnf);
  if (!g.ok()) return g.status();
  auto c = std::make_shared<const CompiledGrammar>(ByteGrammar::Lower(*g), std::move(gbnf), std::move(vocab));
  if (!c->nonempty()) return core::InvalidArgument("json schema: no value satisfies the schema");
  return c;
}

std::shared_ptr<const CompiledGrammar> CompiledGrammar::JsonObject(std::shared_ptr<const Vocabulary> vocab) {
  auto g = FromGbnf(JsonObjectGbnf(), std::move(vocab));
  RADIXLM_CHECK_MSG(g.ok(), g.status().message());
  return *g;
}

size_t CompiledGrammar::KeyHash::operator()(const ContextKey& k) const {
  uint64_t h = 0x9E3779B97F4A7C15ULL;
  for (int32_t x : k) h = (h ^ static_cast<uint32_t>(x)) * 0x100000001B3ULL;
  return static_cast<size_t>(h ^ (h >> 29));
}
size_t CompiledGrammar::KeyHash::operator()(const std::vector<int32_t>& k) const {
  uint64_t h = 0x9E3779B97F4A7C15ULL;
  for (int32_t x : k) h = (h ^ static_cast<uint32_t>(x)) * 0x100000001B3ULL;
  return static_cast<size_t>(h ^ (h >> 29));
}

std::shared_ptr<const CompiledGrammar::MaskEntry> CompiledGrammar::Entry(const ContextKey& key, int64_t* fuel) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) return it->second;
  }
  // Computed outside the lock (a walk can take milliseconds); a racing duplicate is dropped.
  std::shared_ptr<const MaskEntry> e = ComputeEntry(key, fuel);
  if (!e) return nullptr;
  const size_t bytes = 128 + 4 * (e->accepted_bits.size() + e->accepted_ids.size()) + 6 * e->uncertain.size();
  std::lock_guard<std::mutex> lock(mu_);
  if (entry_bytes_ + bytes > kMaxEntryBytes) {  // full: start afresh (holders keep theirs)
    entries_.clear();
    entry_bytes_ = 0;
  }
  auto [it, inserted] = entries_.emplace(key, std::move(e));
  if (inserted) entry_bytes_ += bytes;
  return it->second;
}

core::Status CompiledGrammar::CheckCost(int64_t fuel) const {
  Matcher m(std::shared_ptr<const CompiledGrammar>(std::shared_ptr<const CompiledGrammar>{}, this));
  m.set_fuel(fuel);
  std::vector<uint32_t> mask((static_cast<size_t>(vocab_->size()) + 31) / 32);
  if (m.over_budget() || !m.FillNextTokenMask(mask))
    return core::InvalidArgument("grammar: its first token mask would cost more than the budget of " + std::to_string(fuel) +
                                 " work units (too many alternatives or stacks live at once)");
  if (std::all_of(mask.begin(), mask.end(), [](uint32_t w) { return w == 0; }))
    return core::InvalidArgument("grammar: no token of the vocabulary can start a text it matches");
  return core::Status::Ok();
}

bool CompiledGrammar::LookupState(const std::vector<int32_t>& state, std::vector<int32_t>* ids) const {
  std::lock_guard<std::mutex> lock(state_mu_);
  auto it = states_.find(state);
  if (it == states_.end()) return false;
  *ids = it->second;
  return true;
}

void CompiledGrammar::StoreState(const std::vector<int32_t>& state, const std::vector<int32_t>& ids) const {
  constexpr size_t kMaxStates = 1 << 14;  // bounded: forget everything when full
  std::lock_guard<std::mutex> lock(state_mu_);
  if (states_.size() >= kMaxStates) states_.clear();
  states_.emplace(state, ids);
}

// One depth-first walk of the vocabulary trie from the stack the key describes (its bottom a
// kBoundary or kRootParent sentinel). A token is accepted when some path is alive after its
// last byte or ended (boundary or root) exactly there; uncertain when not, but a path popped the
// boundary earlier; otherwise rejected. Stacks are hash-consed for the whole walk, so a parser
// state is a sorted list of top ids, and its transition on a byte is computed once (a DFA built
// lazily: inside a string every character leads back to the same state).
bool CompiledGrammar::WalkTrie(const ContextKey& key, std::vector<int32_t>* accepted, std::vector<int32_t>* uncertain,
                               int64_t* fuel) const {
  const auto& trie = vocab_->trie();
  const auto& trie_tokens = vocab_->trie_tokens();
  int levels = 0;
  while (levels < kContext && key[levels] >= 0) ++levels;
  std::vector<int32_t> chain(key.rbegin() + (kContext + 1 - levels), key.rend());  // bottom first
  StateDfa dfa(g_, chain, levels == kContext ? key[kContext] : kRootParent);
  // Per depth d: the state after d bytes, and whether a path popped the boundary at depth <= d.
  std::vector<int32_t> state_at = {0};
  std::vector<uint8_t> ended = {0};
  for (int32_t i = 1; i < static_cast<int32_t>(trie.size());) {
    const Vocabulary::TrieNode& tn = trie[i];
    const size_t d = tn.depth;
    state_at.resize(d);
    ended.resize(d);
    uint8_t flags = 0;
    if (--*fuel < 0) return false;
    const int32_t st = dfa.Step(state_at[d - 1], tn.byte, &flags, fuel);
    if (st < 0) return false;
    const bool alive = dfa.Alive(st), boundary = flags & 2, completed = flags & 1;
    const bool ended_before = ended[d - 1];
    state_at.push_back(st);
    ended.push_back(ended_before || boundary);
    for (int32_t t = tn.tokens_begin; t < tn.tokens_end; ++t) {
      if (alive || boundary || completed) {
        accepted->push_back(trie_tokens[t]);
      } else if (ended_before) {
        uncertain->push_back(trie_tokens[t]);
      }
    }
    if (alive) {
      ++i;
      continue;
    }
    if (ended.back() && i + 1 < tn.subtree_end) {  // everything below ran past the context
      const int32_t a = trie[i + 1].tokens_begin;
      const int32_t b = tn.subtree_end < static_cast<int32_t>(trie.size()) ? trie[tn.subtree_end].tokens_begin
                                                                           : static_cast<int32_t>(trie_tokens.size());
      uncertain->insert(uncertain->end(), trie_tokens.begin() + a, trie_tokens.begin() + b);
    }
    i = tn.subtree_end;
  }
  return true;
}

std::shared_ptr<CompiledGrammar::MaskEntry> CompiledGrammar::ComputeEntry(const ContextKey& key, int64_t* fuel) const {
  std::vector<int32_t> accepted, uncertain;
  if (!WalkTrie(key, &accepted, &uncertain, fuel)) return nullptr;
  const int32_t pos = key[0];
  // Special tokens lying inside a literal that starts at this position.
  const int32_t lit = g_.literal_of[pos];
  if (lit >= 0 && !vocab_->special_by_text().empty()) {
    const std::string_view rest = std::string_view(g_.literals[lit]).substr(g_.literal_offset[pos]);
    for (size_t len = 1; len <= std::min(rest.size(), vocab_->max_special_length()); ++len) {
      auto it = vocab_->special_by_text().find(std::string(rest.substr(0, len)));
      if (it != vocab_->special_by_text().end()) accepted.insert(accepted.end(), it->second.begin(), it->second.end());
    }
  }
  auto e = std::make_shared<MaskEntry>();
  const size_t words = (static_cast<size_t>(vocab_->size()) + 31) / 32;
  if (accepted.size() > words) {
    e->accepted_bits.assign(words, 0);
    for (int32_t id : accepted) SetBit(e->accepted_bits, id);
  } else {
    e->accepted_ids = std::move(accepted);
  }
  e->uncertain = std::move(uncertain);
  e->uncertain_lcp.resize(e->uncertain.size(), 0);
  for (size_t k = 1; k < e->uncertain.size(); ++k) {
    const std::string& a = vocab_->bytes(e->uncertain[k - 1]);
    const std::string& b = vocab_->bytes(e->uncertain[k]);
    size_t l = 0;
    while (l < a.size() && l < b.size() && a[l] == b[l] && l < 0xFFFF) ++l;
    e->uncertain_lcp[k] = static_cast<uint16_t>(l);
  }
  return e;
}

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
  StepFlags flags;
  arena_.Refuel(fuel_);
  InitialTops(grammar_->grammar(), arena_, &tops_, &flags);
  if (arena_.exhausted()) {
    over_budget_ = true;
    tops_.clear();
  }
  history_.push_back({0, tops_.size(), arena_.size(), flags.completed, false});
}

std::string Matcher::ShortestCompletion(size_t max_bytes) const {
  const State& s = history_.back();
  if (s.completed) return "";
  constexpr int64_t kNoText = CompiledGrammar::kNoText;
  int64_t best_len = kNoText;
  int32_t best = -1;
  for (int32_t t : Tops(s)) {  // the stack with the shortest finite completion
    int64_t len = 0;
    for (int32_t n = t; n >= 0 && len < kNoText; n = arena_[n].parent) len += grammar_->ShortestFrom(arena_[n].pos);
    if (len < best_len) best_len = len, best = t;
  }
  if (best < 0 || best_len > static_cast<int64_t>(max_bytes)) return "";
  std::string text;
  for (int32_t n = best; n >= 0; n = arena_[n].parent)
    if (!grammar_->AppendShortestFrom(arena_[n].pos, &text, max_bytes)) return "";
  return text;
}

bool Matcher::IsTerminated() const {
  const State& s = history_.back();
  return s.stopped || (s.completed && s.tops_begin == s.tops_end);
}

bool Matcher::Advance(std::span<const int32_t> tops, std::string_view bytes) {
  const ByteGrammar& g = grammar_->grammar();
  const size_t arena_before = arena_.size();
  std::vector<int32_t> cur(tops.begin(), tops.end()), next;
  StepFlags flags{history_.back().completed, false};
  arena_.Refuel(fuel_);
  for (size_t k = 0; k < bytes.size(); ++k) {
    flags = StepByte(g, arena_, cur, static_cast<uint8_t>(bytes[k]), &next);
    cur.swap(next);
    if (arena_.exhausted()) over_budget_ = true;
    if (over_budget_ || (cur.empty() && !(flags.completed && k + 1 == bytes.size()))) {
      arena_.Truncate(arena_before);
      return false;
    }
  }
  const size_t begin = tops_.size();
  tops_.insert(tops_.end(), cur.begin(), cur.end());
  history_.push_back({begin, tops_.size(), arena_.size(), flags.completed, false});
  return true;
}

bool Matcher::SpecialAllowedAt(int32_t pos, const std::string& text) const {
  const ByteGrammar& g = grammar_->grammar();
  const int32_t lit = g.literal_of[pos];
  if (lit < 0) return false;
  return std::string_view(g.literals[lit]).substr(g.literal_offset[pos]).starts_with(text);
}

bool Matcher::AcceptToken(int32_t id) {
  const Vocabulary& v = grammar_->vocab();
  if (id < 0 || id >= v.size() || history_.back().stopped || over_budget_) return false;
  const State s = history_.back();
  if (v.IsStop(id)) {
    if (!s.completed) return false;
    history_.push_back({tops_.size(), tops_.size(), arena_.size(), true, true});
    return true;
  }
  const std::string& bytes = v.bytes(id);
  if (bytes.empty()) return false;
  if (!v.IsSpecial(id)) return Advance(std::vector<int32_t>(Tops(s).begin(), Tops(s).end()), bytes);
  std::vector<int32_t> allowed;  // only stacks sitting in a literal that spells the token
  for (int32_t t : Tops(s)) {
    if (SpecialAllowedAt(arena_[t].pos, bytes)) allowed.push_back(t);
  }
  return !allowed.empty() && Advance(allowed, bytes);
}

bool Matcher::AcceptBytes(std::string_view bytes) {
  if (history_.back().stopped || over_budget_) return false;
  const State s = history_.back();
  return Advance(std::vector<int32_t>(Tops(s).begin(), Tops(s).end()), bytes);
}

void Matcher::Rollback(int n) {
  RADIXLM_CHECK(n >= 0 && n <= steps());
  history_.resize(history_.size() - static_cast<size_t>(n));
  const State& s = history_.back();
  tops_.resize(s.tops_end);
  arena_.Truncate(s.arena_size);
}

CompiledGrammar::ContextKey Matcher::KeyOf(int32_t top) const {
  CompiledGrammar::ContextKey key;
  key.fill(kRootParent);
  int32_t n = top;
  for (int i = 0; i < CompiledGrammar::kContext && n >= 0; ++i) {
    key[i] = arena_[n].pos;
    n = arena_[n].parent;
  }
  if (n >= 0) key[CompiledGrammar::kContext] = kBoundary;
  return key;
}

bool Matcher::FillNextTokenMask(std::span<uint32_t> bitmask) {
  const Vocabulary& v = grammar_->vocab();
  RADIXLM_CHECK(bitmask.size() * 32 >= static_cast<size_t>(v.size()));
  std::fill(bitmask.begin(), bitmask.end(), 0u);
  if (!over_budget_ && FillMask(bitmask)) return true;
  over_budget_ = true;
  std::fill(bitmask.begin(), bitmask.end(), 0u);
  return false;
}

bool Matcher::FillMask(std::span<uint32_t> bitmask) {
  const Vocabulary& v = grammar_->vocab();
  const State s = history_.back();
  int64_t fuel = fuel_;
  if (!s.stopped) {
    std::vector<std::shared_ptr<const CompiledGrammar::MaskEntry>> entries;
    std::unordered_map<CompiledGrammar::ContextKey, bool, CompiledGrammar::KeyHash> seen;
    bool any_uncertain = false;
    for (int32_t t : Tops(s)) {
      if ((fuel -= CompiledGrammar::kContext + 1) < 0) return false;
      const CompiledGrammar::ContextKey key = KeyOf(t);
      auto e = grammar_->Entry(key, &fuel);
      if (!e) return false;
      entries.push_back(e);
      any_uncertain |= !e->uncertain.empty();
      if (!seen.emplace(key, true).second) continue;
      if (!e->accepted_bits.empty()) {
        if ((fuel -= static_cast<int64_t>(e->accepted_bits.size()) / 64) < 0) return false;
        for (size_t w = 0; w < e->accepted_bits.size(); ++w) bitmask[w] |= e->accepted_bits[w];
      } else {
        if ((fuel -= static_cast<int64_t>(e->accepted_ids.size()) / 16) < 0) return false;
        for (int32_t id : e->accepted_ids) SetBit(bitmask, id);
      }
    }
    if (any_uncertain) {
      // The state's identity: every stack's positions, top to bottom, separated.
      state_key_.clear();
      for (int32_t t : Tops(s)) {
        for (int32_t n = t; n >= 0; n = arena_[n].parent) state_key_.push_back(arena_[n].pos);
        state_key_.push_back(kBoundary);
      }
      if ((fuel -= static_cast<int64_t>(state_key_.size())) < 0) return false;
      if (!grammar_->LookupState(state_key_, &uncertain_ok_)) {
        uncertain_ok_.clear();
        const auto tops = Tops(s);
        arena_.Refuel(fuel);
        for (size_t i = 0; i < tops.size(); ++i) {
          if (!entries[i]->uncertain.empty() && !CheckUncertain(tops[i], *entries[i], bitmask, &uncertain_ok_)) return false;
        }
        fuel = arena_.fuel();
        grammar_->StoreState(state_key_, uncertain_ok_);
      }
      for (int32_t id : uncertain_ok_) SetBit(bitmask, id);
    }
  }
  if (s.completed || s.stopped) {
    for (int32_t id : v.stop_ids()) SetBit(bitmask, id);
  }
  last_mask_units_ = fuel_ - fuel;
  return true;
}

// The uncertain tokens of a top's context against its full stack, in trie order: the state
// after each prefix depth is kept and reused by the next token sharing that prefix.
bool Matcher::CheckUncertain(int32_t top, const CompiledGrammar::MaskEntry& e, std::span<const uint32_t> accepted,
                             std::vector<int32_t>* ok_ids) {
  const ByteGrammar& g = grammar_->grammar();
  const Vocabulary& v = grammar_->vocab();
  const size_t arena_base = arena_.size();
  walk_tops_.assign(1, top);
  walk_off_.assign({0, 1});
  walk_mark_.assign(1, arena_base);
  size_t valid = 0;              // states known for depths 0..valid (a prefix of the last token)
  size_t dead = SIZE_MAX;        // depth whose state is empty (prefix rejected)
  for (size_t k = 0; k < e.uncertain.size(); ++k) {
    const int32_t id = e.uncertain[k];
    const std::string& bytes = v.bytes(id);
    const size_t lcp = k == 0 ? 0 : std::min<size_t>(e.uncertain_lcp[k], valid);
    valid = lcp;
    if (!arena_.Burn()) break;
    if (dead <= lcp) continue;  // shares a rejected prefix
    if (GetBit(accepted, id)) continue;
    arena_.Truncate(walk_mark_[lcp]);
    walk_tops_.resize(walk_off_[lcp + 1]);
    walk_off_.resize(lcp + 2);
    walk_mark_.resize(lcp + 1);
    dead = SIZE_MAX;
    bool ok = false;
    for (size_t d = lcp; d < bytes.size(); ++d) {
      const std::span<const int32_t> cur(walk_tops_.data() + walk_off_[d], walk_off_[d + 1] - walk_off_[d]);
      const StepFlags f = StepByte(g, arena_, cur, static_cast<uint8_t>(bytes[d]), &walk_next_);
      if (arena_.exhausted()) break;
      walk_tops_.insert(walk_tops_.end(), walk_next_.begin(), walk_next_.end());
      walk_off_.push_back(walk_tops_.size());
      walk_mark_.push_back(arena_.size());
      valid = d + 1;
      if (walk_next_.empty()) {
        ok = f.completed && d + 1 == bytes.size();
        dead = d + 1;
        break;
      }
      if (d + 1 == bytes.size()) ok = true;
    }
    if (arena_.exhausted()) break;
    if (ok) ok_ids->push_back(id);
  }
  arena_.Truncate(arena_base);
  return !arena_.exhausted();
}

}  // namespace radixlm::grammar
