// ByteGrammar lowering (code points -> UTF-8 byte sequences) and the stack automaton.
#include "grammar/pda.h"

#include <map>
#include <tuple>

namespace radixlm::grammar {
namespace {

using ByteSeq = std::vector<std::pair<uint8_t, uint8_t>>;  // one byte range per position

// The UTF-8 encodings of [lo, hi] as byte-range sequences (the construction of Russ Cox's
// RE2 / Rust's utf8-ranges: split until every byte position is an independent range).
void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<ByteSeq>* out) {
  static const uint32_t kMaxForLen[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  std::vector<std::pair<uint32_t, uint32_t>> work = {{lo, hi}};
  while (!work.empty()) {
    auto [a, b] = work.back();
    work.pop_back();
    bool split = false;
    for (int n = 0; n < 3 && !split; ++n) {  // split at encoded-length boundaries
      if (a <= kMaxForLen[n] && b > kMaxForLen[n]) {
        work.push_back({kMaxForLen[n] + 1, b});
        work.push_back({a, kMaxForLen[n]});
        split = true;
      }
    }
    if (split) continue;
    if (b < 0x80) {
      out->push_back({{static_cast<uint8_t>(a), static_cast<uint8_t>(b)}});
      continue;
    }
    for (int i = 1; i < 4 && !split; ++i) {  // align to continuation-byte boundaries
      const uint32_t m = (1u << (6 * i)) - 1;
      if ((a & ~m) != (b & ~m)) {
        if ((a & m) != 0) {
          work.push_back({(a | m) + 1, b});
          work.push_back({a, a | m});
          split = true;
        } else if ((b & m) != m) {
          work.push_back({b & ~m, b});
          work.push_back({a, (b & ~m) - 1});
          split = true;
        }
      }
    }
    if (split) continue;
    const std::string ea = EncodeUtf8(a), eb = EncodeUtf8(b);
    ByteSeq seq;
    for (size_t k = 0; k < ea.size(); ++k) seq.push_back({static_cast<uint8_t>(ea[k]), static_cast<uint8_t>(eb[k])});
    out->push_back(std::move(seq));
  }
}

class Lowerer {
 public:
  explicit Lowerer(const Grammar& g) : g_(g) {}

  ByteGrammar Run() {
    const size_t n = g_.rules.size();
    out_.alternatives.resize(n);
    for (const Rule& r : g_.rules) out_.rule_names.push_back(r.name);
    out_.root = g_.root;
    out_.literals = g_.literals;
    for (size_t r = 0; r < n; ++r) {
      for (const auto& alt : g_.rules[r].alternatives) {
        out_.alternatives[r].push_back(static_cast<int32_t>(out_.elems.size()));
        for (const Symbol& s : alt) EmitSymbol(s);
        Emit(ByteGrammar::Kind::kEnd, static_cast<int32_t>(r));
      }
    }
    // Synthesized rules for multi-byte sets are appended after the grammar's own rules.
    for (size_t i = 0; i < pending_.size(); ++i) EmitCharRule(pending_[i].first, pending_[i].second);
    return std::move(out_);
  }

 private:
  void Emit(ByteGrammar::Kind kind, int32_t arg, int32_t literal = -1, int32_t offset = 0) {
    out_.elems.push_back({kind, arg});
    out_.literal_of.push_back(literal);
    out_.literal_offset.push_back(offset);
  }
  int32_t SetId(const std::array<uint64_t, 4>& set) {
    auto [it, inserted] = set_ids_.emplace(set, static_cast<int32_t>(out_.sets.size()));
    if (inserted) out_.sets.push_back(set);
    return it->second;
  }
  static std::array<uint64_t, 4> RangeSet(uint8_t lo, uint8_t hi) {
    std::array<uint64_t, 4> s{};
    for (int b = lo; b <= hi; ++b) s[b >> 6] |= uint64_t{1} << (b & 63);
    return s;
  }

  void EmitSymbol(const Symbol& s) {
    if (s.kind == Symbol::Kind::kRule) {
      Emit(ByteGrammar::Kind::kRef, s.rule);
      return;
    }
    const std::vector<CharRange> cps = SymbolCodePoints(s);
    if (cps.size() == 1 && cps[0].lo == cps[0].hi) {  // one code point: its bytes inline
      const std::string bytes = EncodeUtf8(cps[0].lo);
      for (size_t k = 0; k < bytes.size(); ++k) {
        const auto b = static_cast<uint8_t>(bytes[k]);
        Emit(ByteGrammar::Kind::kBytes, SetId(RangeSet(b, b)), s.literal, s.literal_offset + static_cast<int32_t>(k));
      }
      return;
    }
    if (cps.empty() || cps.back().hi < 0x80) {  // ASCII only (or nothing): one byte set
      std::array<uint64_t, 4> set{};
      for (CharRange r : cps) {
        auto part = RangeSet(static_cast<uint8_t>(r.lo), static_cast<uint8_t>(r.hi));
        for (int i = 0; i < 4; ++i) set[i] |= part[i];
      }
      Emit(ByteGrammar::Kind::kBytes, SetId(set));
      return;
    }
    Emit(ByteGrammar::Kind::kRef, CharRule(cps));
  }

  int32_t CharRule(const std::vector<CharRange>& cps) {
    std::vector<std::pair<uint32_t, uint32_t>> key;
    for (CharRange r : cps) key.push_back({r.lo, r.hi});
    auto it = char_rules_.find(key);
    if (it != char_rules_.end()) return it->second;
    const auto id = static_cast<int32_t>(out_.alternatives.size());
    out_.alternatives.emplace_back();
    out_.rule_names.push_back("char-set-" + std::to_string(id));
    char_rules_.emplace(key, id);
    pending_.push_back({id, cps});
    return id;
  }

  void EmitCharRule(int32_t id, const std::vector<CharRange>& cps) {
    std::array<uint64_t, 4> ascii{};
    bool has_ascii = false;
    std::vector<ByteSeq> seqs;
    for (CharRange r : cps) {
      if (r.lo < 0x80) {
        auto part = RangeSet(static_cast<uint8_t>(r.lo), static_cast<uint8_t>(std::min<uint32_t>(r.hi, 0x7F)));
        for (int i = 0; i < 4; ++i) ascii[i] |= part[i];
        has_ascii = true;
        if (r.hi < 0x80) continue;
        r.lo = 0x80;
      }
      Utf8Sequences(r.lo, r.hi, &seqs);
    }
    if (has_ascii) {
      out_.alternatives[id].push_back(static_cast<int32_t>(out_.elems.size()));
      Emit(ByteGrammar::Kind::kBytes, SetId(ascii));
      Emit(ByteGrammar::Kind::kEnd, id);
    }
    for (const ByteSeq& seq : seqs) {
      out_.alternatives[id].push_back(static_cast<int32_t>(out_.elems.size()));
      for (auto [lo, hi] : seq) Emit(ByteGrammar::Kind::kBytes, SetId(RangeSet(lo, hi)));
      Emit(ByteGrammar::Kind::kEnd, id);
    }
  }

  const Grammar& g_;
  ByteGrammar out_;
  std::map<std::array<uint64_t, 4>, int32_t> set_ids_;
  std::map<std::vector<std::pair<uint32_t, uint32_t>>, int32_t> char_rules_;
  std::vector<std::pair<int32_t, std::vector<CharRange>>> pending_;
};

uint64_t HashPair(int32_t pos, int32_t parent) {
  uint64_t h = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

}  // namespace

ByteGrammar ByteGrammar::Lower(const Grammar& g) { return Lowerer(g).Run(); }

StackArena::StackArena(bool persistent) : table_(256), visited_(64), persistent_(persistent) {}

void StackArena::BeginStep() {
  visited_used_ = 0;
  if (++top_step_ == 0) {  // wrapped: forget every stamp
    std::fill(top_gen_.begin(), top_gen_.end(), 0);
    for (Slot& v : visited_) v.gen = 0;
    top_step_ = 1;
  }
  if (persistent_) return;
  ++gen_;
  used_ = 0;
  if (gen_ == 0) {
    for (Slot& s : table_) s.gen = 0;
    gen_ = 1;
  }
}

StackArena::Slot* StackArena::Find(int32_t pos, int32_t parent) {
  const size_t mask = table_.size() - 1;
  for (size_t i = HashPair(pos, parent) & mask;; i = (i + 1) & mask) {
    Slot& s = table_[i];
    if (s.gen != gen_ || (s.pos == pos && s.parent == parent)) return &s;
  }
}

void StackArena::Grow() {
  std::vector<Slot> old;
  old.swap(table_);
  table_.assign(old.size() * 2, Slot{});
  for (const Slot& s : old) {
    if (s.gen == gen_) *Find(s.pos, s.parent) = s;
  }
}

int32_t StackArena::Make(int32_t pos, int32_t parent) {
  if ((used_ + 1) * 2 > table_.size()) Grow();
  Slot* s = Find(pos, parent);
  if (s->gen == gen_ && s->id < static_cast<int32_t>(nodes_.size())) return s->id;
  *s = {gen_, pos, parent, static_cast<int32_t>(nodes_.size())};
  ++used_;
  nodes_.push_back({pos, parent});
  top_gen_.push_back(0);
  return s->id;
}

bool StackArena::FirstVisit(int32_t pos, int32_t parent) {
  if ((visited_used_ + 1) * 2 > visited_.size()) {  // grow, keeping this step's stamps
    std::vector<Slot> old;
    old.swap(visited_);
    visited_.assign(old.size() * 2, Slot{});
    for (const Slot& v : old) {
      if (v.gen != top_step_) continue;
      for (size_t i = HashPair(v.pos, v.parent) & (visited_.size() - 1);; i = (i + 1) & (visited_.size() - 1)) {
        if (visited_[i].gen != top_step_) {
          visited_[i] = v;
          break;
        }
      }
    }
  }
  const size_t mask = visited_.size() - 1;
  for (size_t i = HashPair(pos, parent) & mask;; i = (i + 1) & mask) {
    Slot& v = visited_[i];
    if (v.gen != top_step_) {
      v = {top_step_, pos, parent, 0};
      ++visited_used_;
      return true;
    }
    if (v.pos == pos && v.parent == parent) return false;
  }
}

bool StackArena::MarkTop(int32_t id) {
  if (static_cast<size_t>(id) >= top_gen_.size()) top_gen_.resize(nodes_.size(), 0);
  if (top_gen_[id] == top_step_) return false;
  top_gen_[id] = top_step_;
  return true;
}

void Closure(const ByteGrammar& g, StackArena& arena, int32_t pos, int32_t parent, std::vector<int32_t>* out,
             StepFlags* flags) {
  // Depth first, alternatives in order (the order of the tops is what a recursion would give):
  // the first alternative continues at once, the others wait on the work stack.
  auto& work = arena.work();
  const size_t base = work.size();
  work.push_back({pos, parent});
  while (work.size() > base) {
    std::tie(pos, parent) = work.back();
    work.pop_back();
    for (;;) {
      if (!arena.Burn()) {
        work.resize(base);
        return;
      }
      const ByteGrammar::Elem e = g.elems[pos];
      if (e.kind == ByteGrammar::Kind::kBytes) {
        const int32_t id = arena.Make(pos, parent);
        if (arena.MarkTop(id)) out->push_back(id);
        break;
      }
      // Expanded already in this step: everything it reaches is reached.
      if (!arena.FirstVisit(pos, parent)) break;
      if (e.kind == ByteGrammar::Kind::kEnd) {
        if (parent < 0) {
          (parent == kRootParent ? flags->completed : flags->boundary) = true;
          break;
        }
        const StackNode p = arena[parent];
        pos = p.pos;
        parent = p.parent;
        continue;  // pop: continue in the parent rule
      }
      // A reference: push the return position unless it is the end (tail call).
      const bool tail = g.elems[pos + 1].kind == ByteGrammar::Kind::kEnd;
      const int32_t ret = tail ? parent : arena.Make(pos + 1, parent);
      const auto& alts = g.alternatives[e.arg];
      if (alts.empty()) break;
      for (size_t i = alts.size() - 1; i > 0; --i) work.push_back({alts[i], ret});
      pos = alts[0];
      parent = ret;
    }
  }
}

void InitialTops(const ByteGrammar& g, StackArena& arena, std::vector<int32_t>* out, StepFlags* flags) {
  arena.BeginStep();
  for (int32_t a : g.alternatives[g.root]) Closure(g, arena, a, kRootParent, out, flags);
}

StepFlags StepByte(const ByteGrammar& g, StackArena& arena, std::span<const int32_t> tops, uint8_t b,
                   std::vector<int32_t>* out) {
  out->clear();
  StepFlags flags;
  arena.BeginStep();
  for (int32_t t : tops) {
    const StackNode n = arena[t];
    if (g.Test(n.pos, b)) Closure(g, arena, n.pos + 1, n.parent, out, &flags);
    if (arena.exhausted()) break;
  }
  return flags;
}

}  // namespace radixlm::grammar
