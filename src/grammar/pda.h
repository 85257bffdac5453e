// The grammar lowered to bytes, and the pushdown automaton that runs it.
//
// ByteGrammar: every rule of a Grammar becomes a list of alternatives laid out in one flat
// array of elements (a byte set, a rule reference, or the end of an alternative); a "position"
// is an index into that array. Code-point sets become UTF-8 byte sequences (one synthesized
// rule per distinct multi-byte set; a single code point is inlined as its bytes), so matching is
// over bytes and a token may end inside a multi-byte character (XGrammar's byte-level PDA,
// arXiv:2411.15100, without its left_utf8_bytes bookkeeping).
//
// Stacks: a stack is a linked list of StackNodes (position, parent) living in a StackArena.
// Its top is always a byte-set position; lower nodes are return positions in parent rules. A
// parser state is a set of top node ids (several stacks when the grammar is ambiguous, as
// llama.cpp's llama_grammar_stacks). Stepping a byte pops and pushes by creating nodes; nodes
// never change, so states share their common stack bottoms, and dropping a step's nodes is a
// truncation of the arena (rollback, and the trie walks of token masks).
// A reference in tail position does not push a return node (its rule would only end there),
// so right-recursive repetitions (`x ::= a x |`) keep stacks flat.
// Closure is iterative (an explicit work stack, not the C++ stack: a chain of 100k rules
// cannot overflow it) and expands each (position, parent) pair once per step, so nullable
// repetitions side by side cost their sum, not their product.
//
// Cost bound: the arena carries a fuel budget (Refuel). Every node made and every position a
// closure expands burns one unit; once it is spent, Closure and StepByte stop early and
// exhausted() is true: the caller must then discard the step (the tops are incomplete). A
// request's grammar cannot make a step cost more than the budget its caller sets.
//
// Parent sentinels: kRootParent below the root rule (popping it = the root is complete), and
// kBoundary below a lone position (popping it = that position's rule ended: the token mask cache
// computes what a position accepts without knowing its context, compiled_grammar.h).
// Thread-safety: ByteGrammar is immutable; a StackArena belongs to one thread.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"

namespace radixlm::grammar {

struct ByteGrammar {
  enum class Kind : uint8_t { kBytes, kRef, kEnd };
  struct Elem {
    Kind kind;
    int32_t arg;  // kBytes: index into sets; kRef: rule id; kEnd: owning rule id
  };
  std::vector<Elem> elems;
  std::vector<std::array<uint64_t, 4>> sets;        // 256-bit byte sets
  std::vector<std::vector<int32_t>> alternatives;   // per rule: start positions
  std::vector<std::string> rule_names;
  int32_t root = -1;
  // Per position: the literal it belongs to (-1: none) and its byte offset in that literal.
  std::vector<int32_t> literal_of, literal_offset;
  std::vector<std::string> literals;

  static ByteGrammar Lower(const Grammar& g);

  bool Test(int32_t pos, uint8_t b) const {
    const auto& s = sets[elems[pos].arg];
    return (s[b >> 6] >> (b & 63)) & 1;
  }
};

inline constexpr int32_t kRootParent = -1;
inline constexpr int32_t kBoundary = -2;

struct StackNode {
  int32_t pos;
  int32_t parent;  // node id, or kRootParent / kBoundary
};

// Nodes of persistent stacks. Within one step (BeginStep .. next BeginStep), equal
// (pos, parent) pairs get one node, so equal stacks are one top id.
class StackArena {
 public:
  // persistent: equal (pos, parent) pairs share one node for the arena's whole life (not just
  // within a step), so equal stacks are equal ids everywhere (for memoized transitions).
  // REQUIRES for a persistent arena: no Truncate.
  explicit StackArena(bool persistent = false);
  void BeginStep();
  // The work budget from now on (units: nodes made plus positions expanded); unlimited at first.
  void Refuel(int64_t units) { fuel_ = units; }
  int64_t fuel() const { return fuel_; }
  bool exhausted() const { return fuel_ < 0; }
  // Spends n units; false once the budget is spent.
  bool Burn(int64_t n = 1) { return (fuel_ -= n) >= 0; }
  // True the first time (pos, parent) is expanded in this step (Closure's pruning).
  bool FirstVisit(int32_t pos, int32_t parent);
  // Closure's work stack (scratch, reused).
  std::vector<std::pair<int32_t, int32_t>>& work() { return work_; }
  // The node for (pos, parent), made in this step if new.
  int32_t Make(int32_t pos, int32_t parent);
  bool MarkTop(int32_t id);  // false when id was already a top in this step
  const StackNode& operator[](int32_t id) const { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }
  void Truncate(size_t n) {
    nodes_.resize(n);
    top_gen_.resize(n);
  }

 private:
  struct Slot {
    uint32_t gen = 0;
    int32_t pos = 0, parent = 0, id = 0;
  };
  Slot* Find(int32_t pos, int32_t parent);
  void Grow();
  std::vector<StackNode> nodes_;
  std::vector<uint32_t> top_gen_;  // per node: the step in which it was last marked a top
  std::vector<Slot> table_;
  std::vector<Slot> visited_;  // (pos, parent) pairs expanded in this step (stamped top_step_)
  size_t visited_used_ = 0;
  std::vector<std::pair<int32_t, int32_t>> work_;
  int64_t fuel_ = INT64_MAX;
  uint32_t gen_ = 1;       // table generation (per step unless persistent)
  uint32_t top_step_ = 1;  // MarkTop generation (per step)
  size_t used_ = 0;
  bool persistent_ = false;
};

// What a step (or the closure of an initial position) reached besides new tops.
struct StepFlags {
  bool completed = false;  // popped kRootParent: the root rule can end here
  bool boundary = false;   // popped kBoundary
};

// Expands position `pos` under `parent` to byte-set tops, appending new top ids to `out`.
// REQUIRES: arena.BeginStep() called for this step.
void Closure(const ByteGrammar& g, StackArena& arena, int32_t pos, int32_t parent, std::vector<int32_t>* out,
             StepFlags* flags);

// The initial state of the root rule.
void InitialTops(const ByteGrammar& g, StackArena& arena, std::vector<int32_t>* out, StepFlags* flags);

// Advances every stack of `tops` by byte b; survivors' new tops go to `out` (cleared first).
StepFlags StepByte(const ByteGrammar& g, StackArena& arena, std::span<const int32_t> tops, uint8_t b,
                   std::vector<int32_t>* out);

}  // namespace radixlm::grammar
