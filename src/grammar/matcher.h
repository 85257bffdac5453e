// Constrained decoding: a grammar compiled for one vocabulary, and per-sequence matchers that
// say which tokens may come next.
//
// Design (XGrammar, arXiv:2411.15100, "adaptive token mask cache"; llguidance's token trie):
// the grammar is a byte-level pushdown automaton (pda.h). For each position a stack top can be
// at, CompiledGrammar keeps the split of the vocabulary into tokens accepted by that position's
// rule alone (whatever the stack below), tokens rejected by it, and "uncertain" tokens that run
// past the end of the rule, so only the rest of the stack can decide them. The entry of a
// position is computed once, on first use, by one walk of the vocabulary trie that skips every
// rejected prefix's subtree. A mask is then: OR of the accepted sets of the current stack tops,
// plus the uncertain tokens checked against the full stacks (again along the trie order, so
// tokens sharing a prefix share its steps). No step scans the vocabulary through the parser.
//
// Tokens: a stop id (end of sequence / turn) is allowed exactly when the grammar is complete
// (the root rule can end here), and after one is accepted the matcher is terminated. Special
// tokens are never matched as text; one is allowed only where the grammar is inside a quoted
// literal whose remaining text starts with the special token's text (so `"<tool_call>"` in a
// grammar admits Qwen's <tool_call> token there, and a JSON string never admits <|im_end|>).
// Tokens may split a UTF-8 character: matching is over bytes.
//
// Thread-safety: CompiledGrammar is immutable apart from its lazily filled cache, which is
// internally synchronised: share one across threads and requests. A Matcher belongs to one
// sequence and one thread at a time; Fork() copies it for n > 1 / best_of.
// Costs: a mask is O(V/32) words to clear and OR, plus the uncertain tokens' bytes
// (typically a few hundred tokens of a few bytes); AcceptToken is O(token bytes x stacks).
//
// Bounds (a grammar comes from a request): every mask and every accepted token runs on a work
// budget of kStepFuel units (a stack node made, a grammar position expanded, a stack top keyed,
// a vocabulary trie node walked for a new mask entry: each about 5-30 ns, so a step costs at
// most a few tens of milliseconds of one core). A step that would cost more stops, and the
// matcher is then over_budget(): the sequence must end (the server reports it; it never stalls
// the other sequences of the step loop). CheckCost() runs the first mask at compile time, so
// a grammar whose very first mask is over budget, or whose language is empty, is refused before
// it runs. A grammar's mask entry cache holds at most kMaxEntryBytes; past that it starts
// afresh (entries in use live on). Alternatives that can never complete (an empty character
// class, a rule with no finite text) are dropped when the grammar is compiled, so every live
// stack can still be completed: a constrained sample never reaches a dead end.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "grammar/pda.h"
#include "grammar/vocabulary.h"

namespace radixlm::grammar {

// Work units a mask or an accepted token may cost (see the file comment). Measured on the
// JSONSchemaBench schemas with Qwen3's vocabulary, the costliest mask of a random walk (new
// entries included) takes ~1.6M units; the budget leaves room above that.
inline constexpr int64_t kStepFuel = 8'000'000;
inline constexpr size_t kMaxEntryBytes = size_t{256} << 20;

class CompiledGrammar {
 public:
  // A GBNF grammar (grammar.h) whose start rule is `root`.
  static core::StatusOr<std::shared_ptr<const CompiledGrammar>> FromGbnf(
      std::string_view gbnf, std::shared_ptr<const Vocabulary> vocab, std::string_view root = "root");
  // A JSON Schema (json_schema.h): an error names the keyword it cannot express exactly.
  static core::StatusOr<std::shared_ptr<const CompiledGrammar>> FromJsonSchema(
      std::string_view schema_json, std::shared_ptr<const Vocabulary> vocab);
  // Any JSON object (OpenAI's response_format {"type": "json_object"}).
  static std::shared_ptr<const CompiledGrammar> JsonObject(std::shared_ptr<const Vocabulary> vocab);

  const Vocabulary& vocab() const { return *vocab_; }
  const ByteGrammar& grammar() const { return g_; }
  const std::string& gbnf() const { return gbnf_; }

  // How many stack levels (top first) key a mask entry. One level would make every token
  // "uncertain" inside tiny rules (a JSON string's `char`); three cover a string's character,
  // its loop and its closing quote, so only tokens running past the string need the full stack.
  // The key holds the top kContext positions (kRootParent past the stack's bottom), then
  // kBoundary when the stack goes deeper, else kRootParent.
  static constexpr int kContext = 3;
  using ContextKey = std::array<int32_t, kContext + 1>;
  struct KeyHash {
    size_t operator()(const ContextKey& k) const;
    size_t operator()(const std::vector<int32_t>& k) const;
  };

  // The split of the vocabulary for one context (see the file comment). Token ids: accepted as
  // a bitset over ids (dense) or a list (sparse); uncertain in trie order, with the length of
  // the prefix each shares with the one before.
  struct MaskEntry {
    std::vector<uint32_t> accepted_bits;  // ceil(V/32) words, or empty
    std::vector<int32_t> accepted_ids;    // when accepted_bits is empty
    std::vector<int32_t> uncertain;
    std::vector<uint16_t> uncertain_lcp;
  };
  // Computed on first use (thread-safe), burning units of *fuel (the walk's cost; nothing when
  // cached); nullptr when the fuel ran out first. REQUIRES: key[0] is a byte-set position.
  std::shared_ptr<const MaskEntry> Entry(const ContextKey& key, int64_t* fuel) const;

  // The first mask computed within `fuel` units: an error when it would cost more, or when the
  // grammar allows nothing at the start (its language is empty). Warms the entry cache.
  core::Status CheckCost(int64_t fuel = kStepFuel) const;

  // The uncertain tokens a whole parser state (all its stacks, as position lists) accepted,
  // remembered per state so a long string does not recheck them every token. Thread-safe.
  bool LookupState(const std::vector<int32_t>& state, std::vector<int32_t>* ids) const;
  void StoreState(const std::vector<int32_t>& state, const std::vector<int32_t>& ids) const;

  // The shortest text completing the rest of position pos's alternative (the lowest byte of each
  // set), appended to *out; false (and *out as it was) when it would exceed max_bytes.
  bool AppendShortestFrom(int32_t pos, std::string* out, size_t max_bytes) const;
  // Its length, saturated at kNoText (no finite text, or too long to matter).
  int64_t ShortestFrom(int32_t pos) const;
  static constexpr int64_t kNoText = INT64_MAX / 4;

  // Drops the alternatives that derive no finite text (see the file comment).
  CompiledGrammar(ByteGrammar g, std::string gbnf, std::shared_ptr<const Vocabulary> vocab);
  // False when the start rule derives no text at all.
  bool nonempty() const { return shortest_len_[g_.root] < kNoText; }

 private:
  // Shortest derivations (Knuth's generalisation of Dijkstra's algorithm to grammars), then the
  // dead alternatives dropped.
  void ComputeShortest();
  std::vector<int64_t> shortest_len_;    // per rule
  std::vector<int32_t> shortest_start_;  // per rule: the start position of the alternative giving it

  std::shared_ptr<MaskEntry> ComputeEntry(const ContextKey& key, int64_t* fuel) const;
  bool WalkTrie(const ContextKey& key, std::vector<int32_t>* accepted, std::vector<int32_t>* uncertain,
                int64_t* fuel) const;

  ByteGrammar g_;
  std::string gbnf_;
  std::shared_ptr<const Vocabulary> vocab_;
  mutable std::mutex mu_;
  mutable std::unordered_map<ContextKey, std::shared_ptr<const MaskEntry>, KeyHash> entries_;
  mutable size_t entry_bytes_ = 0;
  mutable std::mutex state_mu_;
  mutable std::unordered_map<std::vector<int32_t>, std::vector<int32_t>, KeyHash> states_;
};

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Sets bit i of `bitmask` (word i / 32, bit i % 32) iff token i may come next; every other
  // bit is cleared. Once terminated, only the stop ids are set. False when the step's work
  // budget ran out: the mask is then all clear and the matcher over_budget().
  // REQUIRES: bitmask.size() >= ceil(V / 32) (larger masks, for padded logits, are cleared).
  bool FillNextTokenMask(std::span<uint32_t> bitmask);

  // Advances by one token; false (and no change) when the grammar does not allow it, or when
  // the step's work budget ran out (then over_budget()).
  bool AcceptToken(int32_t id);
  // A step ran out of its work budget (kStepFuel, or set_fuel's): the sequence must end.
  bool over_budget() const { return over_budget_; }
  void set_fuel(int64_t units) { fuel_ = units; }  // tests: a smaller budget per step
  int64_t last_mask_units() const { return last_mask_units_; }  // what the last mask cost
  // Advances by raw bytes as one step (tests, forced text); false and no change when rejected.
  bool AcceptBytes(std::string_view bytes);

  // Undoes the last n accepted steps (tokens or AcceptBytes calls). REQUIRES: n <= steps().
  void Rollback(int n);
  int steps() const { return static_cast<int>(history_.size()) - 1; }

  // The root rule can end here: stop ids are allowed.
  bool IsCompleted() const { return history_.back().completed; }
  // Nothing but a stop id can follow (or one was accepted).
  bool IsTerminated() const;

  Matcher Fork() const { return *this; }
  // The shortest byte string that completes the grammar from here ("" when complete, or when
  // none of at most max_bytes exists): e.g. to close a JSON document cut by max_tokens. Not
  // necessarily one token sequence of the vocabulary.
  std::string ShortestCompletion(size_t max_bytes = 1 << 16) const;
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  struct State {
    size_t tops_begin, tops_end;  // into tops_
    size_t arena_size;            // arena_ nodes when this state was made
    bool completed = false, stopped = false;
  };
  std::span<const int32_t> Tops(const State& s) const { return {tops_.data() + s.tops_begin, s.tops_end - s.tops_begin}; }
  // Runs `bytes` from `tops`; on success pushes the new state.
  bool Advance(std::span<const int32_t> tops, std::string_view bytes);
  bool SpecialAllowedAt(int32_t pos, const std::string& text) const;
  CompiledGrammar::ContextKey KeyOf(int32_t top) const;
  // Appends to `ok` the uncertain tokens of e that the full stack under `top` accepts; false
  // when the fuel ran out.
  bool CheckUncertain(int32_t top, const CompiledGrammar::MaskEntry& e, std::span<const uint32_t> accepted,
                      std::vector<int32_t>* ok);
  bool FillMask(std::span<uint32_t> bitmask);

  std::shared_ptr<const CompiledGrammar> grammar_;
  StackArena arena_;
  std::vector<int32_t> tops_;
  std::vector<State> history_;
  // Scratch for the uncertain-token walk.
  std::vector<int32_t> walk_tops_, walk_next_;
  std::vector<size_t> walk_off_, walk_mark_;
  std::vector<int32_t> state_key_, uncertain_ok_;
  int64_t fuel_ = kStepFuel;
  int64_t last_mask_units_ = 0;
  bool over_budget_ = false;
};

}  // namespace radixlm::grammar
