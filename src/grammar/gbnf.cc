// GBNF parser (grammar.h). A recursive-descent port of llama.cpp's llama_grammar_parser; errors
// travel as an internal exception to ParseGbnf, which turns them into a Status.
#include <algorithm>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "grammar/grammar.h"

namespace radixlm::grammar {
namespace {

struct ParseError : std::runtime_error {
  ParseError(std::string msg, size_t at) : std::runtime_error(std::move(msg)), pos(at) {}
  size_t pos;
};

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class Parser {
 public:
  Parser(std::string_view text, const GrammarLimits& limits) : s_(text), limits_(limits) {
    // Every word of the text, so auxiliary names never take a name defined further down.
    for (size_t i = 0; i < s_.size();) {
      size_t e = i;
      while (e < s_.size() && IsWordChar(s_[e])) ++e;
      if (e > i) words_.emplace(s_.substr(i, e - i));
      i = e > i ? e : i + 1;
    }
  }

  Grammar Parse(std::string_view root) {
    size_t pos = SkipSpace(0, true);
    while (pos < s_.size()) pos = ParseRule(pos);
    for (size_t r = 0; r < g_.rules.size(); ++r) {
      if (!defined_[r]) throw ParseError("Undefined rule identifier '" + g_.rules[r].name + "'", s_.size());
    }
    auto it = ids_.find(std::string(root));
    if (it == ids_.end()) throw ParseError("grammar does not contain a '" + std::string(root) + "' symbol", s_.size());
    g_.root = it->second;
    return std::move(g_);
  }

 private:
  char At(size_t p) const { return p < s_.size() ? s_[p] : '\0'; }
  [[noreturn]] void Fail(const std::string& what, size_t p) const { throw ParseError(what, p); }

  size_t SkipSpace(size_t p, bool newline_ok) const {
    while (p < s_.size()) {
      char c = s_[p];
      if (c == '#') {
        while (p < s_.size() && s_[p] != '\r' && s_[p] != '\n') ++p;
      } else if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
        ++p;
      } else {
        break;
      }
    }
    return p;
  }

  int32_t SymbolId(const std::string& name) {
    auto [it, inserted] = ids_.emplace(name, static_cast<int32_t>(g_.rules.size()));
    if (inserted) {
      if (g_.rules.size() >= limits_.max_rules)
        Fail("the grammar has more than " + std::to_string(limits_.max_rules) + " rules (groups and repetitions count)", 0);
      g_.rules.push_back({name, {}});
      defined_.push_back(false);
    }
    return it->second;
  }
  // An auxiliary rule for a group or repetition, named `base-N` (llama.cpp writes `base_N`, which is not a valid name to parse back).
  int32_t NewSymbol(const std::string& base) {
    std::string name;
    do name = base + "-" + std::to_string(next_aux_++); while (ids_.count(name) || words_.count(name));
    return SymbolId(name);
  }

  size_t ParseName(size_t p) const {
    size_t e = p;
    while (IsWordChar(At(e))) ++e;
    if (e == p) Fail("expecting name at ", p);
    return e;
  }

  uint32_t ParseHex(size_t& p, int n) const {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      char c = At(p + i);
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) Fail("expecting " + std::to_string(n) + " hex chars at ", p);
      v = v * 16 + static_cast<uint32_t>(d);
    }
    p += n;
    return v;
  }

  // One (possibly escaped) code point at p; advances p.
  uint32_t ParseChar(size_t& p) const {
    if (p >= s_.size()) Fail("unexpected end of input", p);
    if (s_[p] == '\\') {
      size_t start = p;
      char c = At(p + 1);
      p += 2;
      switch (c) {
        case 'x': return ParseHex(p, 2);
        case 'u': return ParseHex(p, 4);
        case 'U': return ParseHex(p, 8);
        case 't': return '\t';
        case 'r': return '\r';
        case 'n': return '\n';
        case '\\': case '"': case '[': case ']': case '-': return static_cast<uint32_t>(c);
        default: Fail("unknown escape at ", start);
      }
    }
    return DecodeUtf8(p);
  }

  // llama.cpp's decode_utf8: a lead byte gives the length; a truncated sequence stops early.
  uint32_t DecodeUtf8(size_t& p) const {
    static const int kLen[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    unsigned char first = static_cast<unsigned char>(s_[p]);
    int len = kLen[first >> 4];
    uint32_t mask = (1u << (8 - len)) - 1;
    uint32_t v = first & mask;
    ++p;
    for (int i = 1; i < len && p < s_.size(); ++i, ++p) v = (v << 6) | (static_cast<unsigned char>(s_[p]) & 0x3F);
    return v;
  }

  size_t ParseRule(size_t p) {
    size_t name_end = ParseName(p);
    std::string name(s_.substr(p, name_end - p));
    size_t q = SkipSpace(name_end, false);
    if (s_.substr(q, 3) != "::=") Fail("expecting ::= at ", q);
    int32_t id = SymbolId(name);
    if (defined_[id]) Fail("rule '" + name + "' defined twice at ", p);
    defined_[id] = true;
    q = ParseAlternates(SkipSpace(q + 3, true), name, id, false);
    if (At(q) == '\r') {
      q += At(q + 1) == '\n' ? 2 : 1;
    } else if (At(q) == '\n') {
      ++q;
    } else if (q < s_.size()) {
      Fail("expecting newline or end at ", q);
    }
    return SkipSpace(q, true);
  }

  size_t ParseAlternates(size_t p, const std::string& name, int32_t id, bool nested) {
    std::vector<std::vector<Symbol>> alts;
    alts.emplace_back();
    p = ParseSequence(p, name, alts.back(), nested);
    while (At(p) == '|') {
      alts.emplace_back();
      p = ParseSequence(SkipSpace(p + 1, true), name, alts.back(), nested);
    }
    g_.rules[id].alternatives = std::move(alts);
    defined_[id] = true;
    return p;
  }

  size_t ParseSequence(size_t p, const std::string& name, std::vector<Symbol>& seq, bool nested);
  size_t ParseGroup(size_t p, const std::string& name, std::vector<Symbol>& seq, bool nested, size_t* last_start,
                    uint64_t* n_prev);
  // Counts n more symbols against the limit.
  void AddSymbols(uint64_t n, size_t p) {
    symbols_ += n;
    if (symbols_ > limits_.max_symbols)
      Fail("the grammar has more than " + std::to_string(limits_.max_symbols) + " symbols (repetitions expanded) at ", p);
  }
  void Repeat(std::vector<Symbol>& seq, size_t last_start, uint64_t& n_prev, const std::string& name,
              uint64_t min, uint64_t max, size_t p);
  size_t ParseLiteral(size_t p, std::vector<Symbol>& seq);
  size_t ParseClass(size_t p, std::vector<Symbol>& seq);
  size_t ParseBraces(size_t p, uint64_t* min, uint64_t* max, bool nested);

  std::string_view s_;
  const GrammarLimits& limits_;
  uint64_t symbols_ = 0;
  int nesting_ = 0;
  Grammar g_;
  std::vector<bool> defined_;
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_set<std::string> words_;
  int next_aux_ = 1;
};

size_t Parser::ParseLiteral(size_t p, std::vector<Symbol>& seq) {
  const int32_t lit = static_cast<int32_t>(g_.literals.size());
  g_.literals.emplace_back();
  while (At(p) != '"') {
    if (p >= s_.size()) Fail("unexpected end of input", p);
    uint32_t cp = ParseChar(p);
    AddSymbols(1, p);
    Symbol s;
    s.ranges = {{cp, cp}};
    s.literal = lit;
    s.literal_offset = static_cast<int32_t>(g_.literals[lit].size());
    if (cp <= 0x10FFFF) g_.literals[lit] += EncodeUtf8(cp);
    seq.push_back(std::move(s));
  }
  return p + 1;
}

size_t Parser::ParseClass(size_t p, std::vector<Symbol>& seq) {
  Symbol s;
  if (At(p) == '^') {
    s.negated = true;
    ++p;
  }
  while (At(p) != ']') {
    if (p >= s_.size()) Fail("unexpected end of input", p);
    uint32_t lo = ParseChar(p);
    uint32_t hi = lo;
    if (At(p) == '-' && At(p + 1) != ']') {
      if (p + 1 >= s_.size()) Fail("unexpected end of input", p);
      ++p;
      hi = ParseChar(p);
    }
    s.ranges.push_back({lo, hi});
  }
  AddSymbols(1, p);
  seq.push_back(std::move(s));
  return p + 1;
}

size_t Parser::ParseBraces(size_t p, uint64_t* min, uint64_t* max, bool nested) {
  p = SkipSpace(p, nested);
  auto parse_int = [&](size_t& q) {
    size_t e = q;
    while (IsDigit(At(e))) ++e;
    if (e == q) Fail("expecting an int at ", q);
    if (e - q > 18) Fail("number of repetitions exceeds sane defaults, please reduce the number of repetitions", q);
    uint64_t v = std::stoull(std::string(s_.substr(q, e - q)));
    q = SkipSpace(e, nested);
    return v;
  };
  *min = parse_int(p);
  *max = UINT64_MAX;
  if (At(p) == '}') {
    *max = *min;
  } else if (At(p) == ',') {
    p = SkipSpace(p + 1, nested);
    if (IsDigit(At(p))) *max = parse_int(p);
    if (At(p) != '}') Fail("expecting '}' at ", p);
  } else {
    Fail("expecting ',' at ", p);
  }
  if (*min > kMaxRepetition) Fail("number of repetitions exceeds sane defaults, please reduce the number of repetitions", p);
  if (*max != UINT64_MAX && *max > kMaxRepetition) *max = UINT64_MAX;
  if (*max != UINT64_MAX && *max < *min) Fail("repetition maximum below its minimum at ", p);
  return SkipSpace(p + 1, nested);
}

// llama.cpp's handle_repetitions: S{m,n} -> S x m, then a chain of n-m optional rules
// (S'(x) ::= S S'(x-1) |); S{m,} -> S x m, S' ::= S S' |.
void Parser::Repeat(std::vector<Symbol>& seq, size_t last_start, uint64_t& n_prev, const std::string& name,
                    uint64_t min, uint64_t max, size_t p) {
  if (last_start == seq.size()) Fail("expecting preceding item to */+/?/{ at ", p);
  const bool no_max = max == UINT64_MAX;
  std::vector<Symbol> prev(seq.begin() + static_cast<std::ptrdiff_t>(last_start), seq.end());
  uint64_t total = 1;
  if (!no_max && max > 0) {
    total = max;
  } else if (min > 0) {
    total = min;
  }
  if (n_prev * total > kMaxRepetition) {
    Fail("number of rules that are going to be repeated multiplied by the new repetition exceeds sane "
         "defaults, please reduce the number of repetitions or rule complexity", p);
  }
  const uint64_t n_opt = no_max ? 1 : max - min;
  AddSymbols(prev.size() * (min + n_opt) + 2 * n_opt, p);
  if (min == 0) {
    seq.resize(last_start);
  } else {
    for (uint64_t i = 1; i < min; ++i) seq.insert(seq.end(), prev.begin(), prev.end());
  }
  int32_t last_rec = -1;
  for (uint64_t i = 0; i < n_opt; ++i) {
    int32_t rec = NewSymbol(name);
    std::vector<Symbol> body = prev;
    if (i > 0 || no_max) {
      Symbol ref;
      ref.kind = Symbol::Kind::kRule;
      ref.rule = no_max ? rec : last_rec;
      body.push_back(ref);
    }
    g_.rules[rec].alternatives = {std::move(body), {}};
    defined_[rec] = true;
    last_rec = rec;
  }
  if (n_opt > 0) {
    Symbol ref;
    ref.kind = Symbol::Kind::kRule;
    ref.rule = last_rec;
    seq.push_back(ref);
  }
  n_prev *= total;
}

// A group ( ... ) at p: an auxiliary rule of its alternates, referenced from seq. *last_start
// and *n_prev describe it for a repetition that follows (n_prev: the rules it made).
size_t Parser::ParseGroup(size_t p, const std::string& name, std::vector<Symbol>& seq, bool nested, size_t* last_start,
                          uint64_t* n_prev) {
  // The one recursion of the parser: bounded, so no text can exhaust the stack.
  if (++nesting_ > limits_.max_nesting)
    Fail("groups ( ) nest more than " + std::to_string(limits_.max_nesting) + " deep at ", p);
  const size_t n_before = g_.rules.size();
  int32_t sub = NewSymbol(name);
  p = ParseAlternates(SkipSpace(p + 1, true), name, sub, true);
  --nesting_;
  *n_prev = std::max<uint64_t>(1, g_.rules.size() - n_before);
  *last_start = seq.size();
  Symbol ref;
  ref.kind = Symbol::Kind::kRule;
  ref.rule = sub;
  AddSymbols(1, p);
  seq.push_back(ref);
  if (At(p) != ')') Fail("expecting ')' at ", p);
  return SkipSpace(p + 1, nested);
}

size_t Parser::ParseSequence(size_t p, const std::string& name, std::vector<Symbol>& seq, bool nested) {
  size_t last_start = seq.size();
  uint64_t n_prev = 1;
  while (p < s_.size()) {
    const char c = s_[p];
    if (c == '"') {
      last_start = seq.size();
      n_prev = 1;
      p = SkipSpace(ParseLiteral(p + 1, seq), nested);
    } else if (c == '[') {
      last_start = seq.size();
      n_prev = 1;
      p = SkipSpace(ParseClass(p + 1, seq), nested);
    } else if (IsWordChar(c)) {
      size_t e = ParseName(p);
      Symbol ref;
      ref.kind = Symbol::Kind::kRule;
      ref.rule = SymbolId(std::string(s_.substr(p, e - p)));
      AddSymbols(1, p);
      last_start = seq.size();
      n_prev = 1;
      seq.push_back(ref);
      p = SkipSpace(e, nested);
    } else if (c == '(') {
      p = ParseGroup(p, name, seq, nested, &last_start, &n_prev);
    } else if (c == '.') {
      last_start = seq.size();
      n_prev = 1;
      Symbol any;
      any.any = true;
      AddSymbols(1, p);
      seq.push_back(any);
      p = SkipSpace(p + 1, nested);
    } else if (c == '*' || c == '+' || c == '?') {
      const size_t at = p;
      p = SkipSpace(p + 1, nested);
      Repeat(seq, last_start, n_prev, name, c == '+' ? 1 : 0, c == '?' ? 1 : UINT64_MAX, at);
    } else if (c == '{') {
      const size_t at = p;
      uint64_t min = 0, max = 0;
      p = ParseBraces(p + 1, &min, &max, nested);
      Repeat(seq, last_start, n_prev, name, min, max, at);
    } else if (c == '<' || c == '!') {
      Fail("token terminals <...> are not supported (write the token's text as a literal) at ", p);
    } else {
      break;
    }
  }
  return p;
}

// Rules that can match the empty string: a worklist over the reverse references, linear in
// the symbols (a fixpoint sweep over the rules would be quadratic on a chain of rules).
std::vector<bool> NullableRules(const Grammar& g) {
  const size_t n = g.rules.size();
  std::vector<bool> nullable(n, false);
  // Per alternative: how many of its symbols are not yet known nullable (a character symbol
  // never is); per rule: the alternatives that reference it, once per reference.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> users(n);
  std::vector<std::vector<int32_t>> missing(n);
  std::vector<int32_t> work;
  for (size_t r = 0; r < n; ++r) {
    missing[r].resize(g.rules[r].alternatives.size());
    for (size_t a = 0; a < g.rules[r].alternatives.size(); ++a) {
      const auto& alt = g.rules[r].alternatives[a];
      missing[r][a] = static_cast<int32_t>(alt.size());
      for (const Symbol& s : alt)
        if (s.kind == Symbol::Kind::kRule) users[s.rule].push_back({static_cast<int32_t>(r), static_cast<int32_t>(a)});
      if (alt.empty() && !nullable[r]) {
        nullable[r] = true;
        work.push_back(static_cast<int32_t>(r));
      }
    }
  }
  while (!work.empty()) {
    const int32_t r = work.back();
    work.pop_back();
    for (auto [user, alt] : users[r]) {
      if (--missing[user][alt] == 0 && !nullable[user]) {
        nullable[user] = true;
        work.push_back(user);
      }
    }
  }
  return nullable;
}

// Left recursion (llama_grammar_detect_left_recursion): a rule reachable from itself through
// leftmost references, skipping nullable prefixes. Iterative DFS with colours.
core::Status CheckLeftRecursion(const Grammar& g) {
  const std::vector<bool> nullable = NullableRules(g);
  const size_t n = g.rules.size();
  std::vector<std::vector<int32_t>> left(n);
  for (size_t r = 0; r < n; ++r) {
    for (const auto& alt : g.rules[r].alternatives) {
      for (const Symbol& s : alt) {
        if (s.kind != Symbol::Kind::kRule) break;
        left[r].push_back(s.rule);
        if (!nullable[s.rule]) break;
      }
    }
  }
  std::vector<uint8_t> colour(n, 0);  // 0 new, 1 on the path, 2 done
  for (size_t start = 0; start < n; ++start) {
    if (colour[start]) continue;
    std::vector<std::pair<int32_t, size_t>> stack = {{static_cast<int32_t>(start), 0}};
    colour[start] = 1;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i == left[r].size()) {
        colour[r] = 2;
        stack.pop_back();
        continue;
      }
      int32_t next = left[r][i++];
      if (colour[next] == 1) {
        return core::InvalidArgument("unsupported grammar, left recursion detected for nonterminal '" +
                                     g.rules[next].name + "'");
      }
      if (colour[next] == 0) {
        colour[next] = 1;
        stack.push_back({next, 0});
      }
    }
  }
  return core::Status::Ok();
}

std::string Position(std::string_view text, size_t pos) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  std::string rest(text.substr(std::min(pos, text.size()), 40));
  std::replace(rest.begin(), rest.end(), '\n', ' ');
  return "line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + rest;
}

}  // namespace

core::StatusOr<Grammar> ParseGbnf(std::string_view text, std::string_view root, const GrammarLimits& limits) {
  if (text.size() > limits.max_text_bytes)
    return core::InvalidArgument("grammar: the text is " + std::to_string(text.size()) + " bytes, over the limit of " +
                                 std::to_string(limits.max_text_bytes));
  Grammar g;
  try {
    g = Parser(text, limits).Parse(root);
  } catch (const ParseError& e) {
    std::string msg = e.what();
    if (!msg.empty() && msg.back() == ' ') msg += Position(text, e.pos);  // "... at line L, column C: <text>"
    return core::InvalidArgument("grammar: " + msg);
  }
  RADIXLM_RETURN_IF_ERROR(CheckLeftRecursion(g));
  return g;
}

}  // namespace radixlm::grammar
