#include "jinja/parser.h"

#include "core/utf8.h"

#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

namespace radixlm::jinja {

namespace {

// How deep a template may nest. Parsing, evaluation and the syntax tree's release recurse once
// per level, so these bound the stack whatever a template says; real chat templates nest a
// handful of blocks and a few dozen expression levels.
constexpr int kMaxBlockNesting = 64;   // if / for / macro / set / generation blocks
constexpr int kMaxExprDepth = 256;     // an expression's tree (a ~ b ~ c ... counts each ~)

[[noreturn]] void SyntaxError(int line, const std::string& message) {
  throw JinjaError{"TemplateSyntaxError", message + " (line " + std::to_string(line) + ")"};
}

// --- lexer -----------------------------------------------------------------------------------

struct Token {
  enum class Type { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEnd };
  Type type;
  std::string text;  // text, name, operator, decoded string
  int line = 0;
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {
    if (!src_.empty() && src_.back() == '\n') src_.remove_suffix(1);  // keep_trailing_newline=False
  }

  std::vector<Token> Run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const size_t open = FindTagOpen(pos_);
      std::string text(src_.substr(pos_, open - pos_));
      if (open == src_.size()) {
        Emit(Token::Type::kText, std::move(text));
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      const char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (sign == '-') {
        size_t end = text.size();
        while (end > 0 && IsSpace(text[end - 1])) --end;
        text.resize(end);
      } else if (sign != '+' && kind != '{') {  // lstrip_blocks
        const size_t l_pos = text.rfind('\n') + 1;  // npos + 1 = 0
        if (l_pos > 0 || line_starting) {
          bool blank = l_pos < text.size();
          for (size_t i = l_pos; i < text.size(); ++i) blank = blank && (text[i] == ' ' || text[i] == '\t');
          if (blank) text.resize(l_pos);
        }
      }
      Emit(Token::Type::kText, std::move(text));
      pos_ = open + 2 + (sign == '-' || sign == '+');
      if (kind == '#') line_starting = Comment();
      else if (kind == '%' && IsRaw()) line_starting = Raw();
      else line_starting = Tag(kind);
    }
    tokens_.push_back({Token::Type::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t FindTagOpen(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  void Emit(Token::Type type, std::string text) {
    for (char c : text) line_ += c == '\n';
    if (type == Token::Type::kText && text.empty()) return;
    tokens_.push_back({type, std::move(text), line_});
  }

  // After a closing delimiter at pos_ (already past it): "-" strips all following whitespace,
  // trim_blocks one newline after a block or comment unless "+". Returns whether what was
  // consumed ends with a newline (Jinja2's line_starting for the next lstrip).
  bool AfterClose(char sign, bool block) {
    bool newline = false;
    if (sign == '-') {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) newline = src_[pos_++] == '\n';
      if (newline) ++line_;
    } else if (block && sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
      newline = true;
    }
    return newline;
  }

  bool Comment() {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string_view::npos) SyntaxError(line_, "Missing end of comment tag");
    for (size_t i = pos_; i < close; ++i) line_ += src_[i] == '\n';
    const char sign = close > pos_ && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : '\0';
    pos_ = close + 2;
    return AfterClose(sign, true);
  }

  bool IsRaw() const {
    size_t i = pos_;
    while (i < src_.size() && IsSpace(src_[i])) ++i;
    return src_.compare(i, 3, "raw") == 0 && (i + 3 >= src_.size() || !std::isalnum(static_cast<unsigned char>(src_[i + 3])));
  }

  bool Raw() {
    const size_t close = src_.find("%}", pos_);
    if (close == std::string_view::npos) SyntaxError(line_, "unexpected end of template");
    const bool strip_after = src_[close - 1] == '-';
    pos_ = close + 2;
    if (strip_after) AfterClose('-', true);
    else AfterClose('\0', true);
    // The body runs to the next {% endraw %} (any "-" honoured).
    for (size_t i = pos_; (i = src_.find("{%", i)) != std::string_view::npos; i += 2) {
      size_t j = i + 2;
      const char open_sign = j < src_.size() ? src_[j] : '\0';
      if (open_sign == '-' || open_sign == '+') ++j;
      while (j < src_.size() && IsSpace(src_[j])) ++j;
      if (src_.compare(j, 6, "endraw") != 0) continue;
      std::string body(src_.substr(pos_, i - pos_));
      if (open_sign == '-') {
        while (!body.empty() && IsSpace(body.back())) body.pop_back();
      }
      Emit(Token::Type::kText, std::move(body));
      const size_t end = src_.find("%}", j);
      if (end == std::string_view::npos) SyntaxError(line_, "unexpected end of template");
      const char sign = src_[end - 1] == '-' || src_[end - 1] == '+' ? src_[end - 1] : '\0';
      pos_ = end + 2;
      return AfterClose(sign, true);
    }
    SyntaxError(line_, "Missing end of raw directive");
  }

  // Lexes expression tokens up to the tag's closing delimiter.
  bool Tag(char kind) {
    const bool block = kind == '%';
    Emit(block ? Token::Type::kBlockBegin : Token::Type::kVarBegin, "");
    const char close = block ? '%' : '}';
    brackets_ = 0;
    for (;;) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) line_ += src_[pos_++] == '\n';
      if (pos_ >= src_.size()) SyntaxError(line_, std::string("unexpected end of template, expected '") + (block ? "%}" : "}}") + "'");
      char sign = '\0';
      size_t at = pos_;
      if ((src_[at] == '-' || src_[at] == '+') && at + 2 < src_.size() + 0 && src_[at + 1] == close && src_[at + 2] == '}') {
        sign = src_[at];
        ++at;
      }
      // As jinja2's lexer: the closing delimiter counts only outside brackets ({'a': {}}} ends
      // with the dict's brace, then the tag's).
      if (brackets_ == 0 && src_[at] == close && at + 1 < src_.size() && src_[at + 1] == '}') {
        pos_ = at + 2;
        tokens_.push_back({block ? Token::Type::kBlockEnd : Token::Type::kVarEnd, "", line_});
        return AfterClose(sign, block);
      }
      LexOne();
    }
  }

  void LexOne() {
    const char c = src_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t b = pos_;
      while (pos_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
      tokens_.push_back({Token::Type::kName, std::string(src_.substr(b, pos_ - b)), line_});
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      Number();
    } else if (c == '"' || c == '\'') {
      String(c);
    } else {
      static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                         "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|"};
      for (const char* op : kOps) {
        const std::string_view o(op);
        if (src_.compare(pos_, o.size(), o) == 0) {
          if (o == "(" || o == "[" || o == "{") ++brackets_;
          if ((o == ")" || o == "]" || o == "}") && brackets_ > 0) --brackets_;
          tokens_.push_back({Token::Type::kOp, std::string(o), line_});
          pos_ += o.size();
          return;
        }
      }
      SyntaxError(line_, std::string("unexpected char '") + c + "'");
    }
  }

  void Number() {
    const size_t b = pos_;
    bool is_float = false;
    while (pos_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      is_float = true;
      ++pos_;
      while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t e = pos_ + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
        is_float = true;
        pos_ = e;
        while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
      }
    }
    std::string text;
    for (size_t i = b; i < pos_; ++i)
      if (src_[i] != '_') text.push_back(src_[i]);
    tokens_.push_back({is_float ? Token::Type::kFloat : Token::Type::kInt, text, line_});
  }

  // Python string literal escapes: \n \t \r \\ \' \" \xHH \uHHHH \UHHHHHHHH; others kept.
  void String(char quote) {
    std::string out;
    ++pos_;
    for (;;) {
      if (pos_ >= src_.size()) SyntaxError(line_, "unexpected end of string");
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= src_.size()) SyntaxError(line_, "unexpected end of string");
      const char e = src_[pos_++];
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case '0': out.push_back('\0'); break;
        case '\\': case '\'': case '"': out.push_back(e); break;
        case '\n': ++line_; break;  // line continuation
        case 'x': case 'u': case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + n > src_.size()) SyntaxError(line_, "truncated \\" + std::string(1, e) + " escape");
          core::AppendUtf8(static_cast<uint32_t>(std::strtoul(std::string(src_.substr(pos_, n)).c_str(), nullptr, 16)), &out);
          pos_ += n;
          break;
        }
        default: out.push_back('\\'); out.push_back(e);
      }
    }
    tokens_.push_back({Token::Type::kString, std::move(out), line_});
  }


  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  int brackets_ = 0;  // ( [ { open in the current tag
  std::vector<Token> tokens_;
};

// --- parser ----------------------------------------------------------------------------------

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  StmtList Template() {
    std::string end;
    StmtList body = Body({}, &end);
    return body;
  }

 private:
  using T = Token::Type;

  const Token& Peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& Next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool IsOp(const char* op, size_t ahead = 0) const { return Peek(ahead).type == T::kOp && Peek(ahead).text == op; }
  bool IsName(const char* name, size_t ahead = 0) const { return Peek(ahead).type == T::kName && Peek(ahead).text == name; }
  bool AcceptOp(const char* op) {
    if (!IsOp(op)) return false;
    ++i_;
    return true;
  }
  bool AcceptName(const char* name) {
    if (!IsName(name)) return false;
    ++i_;
    return true;
  }
  void ExpectOp(const char* op) {
    if (!AcceptOp(op)) SyntaxError(Peek().line, std::string("expected '") + op + "', got '" + Describe(Peek()) + "'");
  }
  std::string ExpectName() {
    if (Peek().type != T::kName) SyntaxError(Peek().line, "expected a name, got '" + Describe(Peek()) + "'");
    return Next().text;
  }
  void ExpectBlockEnd() {
    if (Peek().type != T::kBlockEnd) SyntaxError(Peek().line, "expected end of statement block, got '" + Describe(Peek()) + "'");
    ++i_;
  }
  static std::string Describe(const Token& t) {
    switch (t.type) {
      case T::kEnd: return "end of template";
      case T::kBlockEnd: return "end of statement block";
      case T::kVarEnd: return "end of print statement";
      default: return t.text;
    }
  }

  // Statements until a block whose keyword is in `ends` (consumed up to the keyword; *end says
  // which). At the top level (no ends) runs to the end of the template.
  StmtList Body(const std::vector<std::string>& ends, std::string* end) {
    StmtList out;
    for (;;) {
      const Token& tok = Peek();
      if (tok.type == T::kEnd) {
        if (!ends.empty()) SyntaxError(tok.line, "Unexpected end of template. Jinja was looking for: " + ends[0]);
        return out;
      }
      if (tok.type == T::kText) {
        auto s = std::make_unique<Stmt>(Stmt{Stmt::Kind::kText});
        s->text = Next().text;
        out.push_back(std::move(s));
      } else if (tok.type == T::kVarBegin) {
        ++i_;
        auto s = std::make_unique<Stmt>(Stmt{Stmt::Kind::kOutput});
        s->line = tok.line;
        s->expr = Expression();
        if (Peek().type != T::kVarEnd) SyntaxError(Peek().line, "expected end of print statement, got '" + Describe(Peek()) + "'");
        ++i_;
        out.push_back(std::move(s));
      } else if (tok.type == T::kBlockBegin) {
        ++i_;
        const std::string kw = Peek().type == T::kName ? Peek().text : "";
        for (const std::string& e : ends)
          if (kw == e) {
            ++i_;
            *end = kw;
            return out;
          }
        out.push_back(Statement());
      } else {
        SyntaxError(tok.line, "unexpected '" + Describe(tok) + "'");
      }
    }
  }

  std::unique_ptr<Stmt> Statement() {
    const int line = Peek().line;
    if (++blocks_ > kMaxBlockNesting)
      SyntaxError(line, "blocks nested more than " + std::to_string(kMaxBlockNesting) + " deep");
    struct Leave {
      int& n;
      ~Leave() { --n; }
    } leave{blocks_};
    const std::string kw = ExpectName();
    std::unique_ptr<Stmt> s;
    if (kw == "if") s = If();
    else if (kw == "for") s = For();
    else if (kw == "set") s = Set();
    else if (kw == "macro") s = Macro();
    else if (kw == "generation") s = Generation();
    else if (kw == "break" || kw == "continue") {
      if (loop_depth_ == 0) SyntaxError(line, "'" + kw + "' outside of a loop");
      s = std::make_unique<Stmt>(Stmt{kw == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue});
      ExpectBlockEnd();
    } else {
      SyntaxError(line, "Encountered unknown tag '" + kw + "'.");
    }
    s->line = line;
    return s;
  }

  std::unique_ptr<Stmt> If() {
    auto s = std::make_unique<Stmt>(Stmt{Stmt::Kind::kIf});
    ExprPtr cond = Expression();
    for (;;) {
      ExpectBlockEnd();
      std::string end;
      StmtList body = Body({"elif", "else", "endif"}, &end);
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (end == "endif") break;
      if (end == "else") {
        ExpectBlockEnd();
        std::string e2;
        s->branches.emplace_back(nullptr, Body({"endif"}, &e2));
        break;
      }
      cond = Expression();
    }
    ExpectBlockEnd();
    return s;
  }

  Target ParseTarget(bool allow_attribute) {
    Target t;
    t.names.push_back(ExpectName());
    if (allow_attribute && AcceptOp(".")) {
      t.attribute = ExpectName();
      return t;
    }
    while (AcceptOp(",")) t.names.push_back(ExpectName());
    return t;
  }

  std::unique_ptr<Stmt> For() {
    auto s = std::make_unique<Stmt>(Stmt{Stmt::Kind::kFor});
    AcceptOp("(");
    s->target = ParseTarget(false);
    AcceptOp(")");
    if (!AcceptName("in")) SyntaxError(Peek().line, "expected 'in'");
    s->expr = Or(false);  // no inline if: it is the loop filter
    if (AcceptName("if")) s->filter = Expression();
    if (AcceptName("recursive")) SyntaxError(Peek().line, "recursive loops are not supported");
    ExpectBlockEnd();
    ++loop_depth_;
    std::string end;
    s->body = Body({"else", "endfor"}, &end);
    --loop_depth_;
    if (end == "else") {
      ExpectBlockEnd();
      s->else_body = Body({"endfor"}, &end);
    }
    ExpectBlockEnd();
    return s;
  }

  std::unique_ptr<Stmt> Set() {
    auto s = std::make_unique<Stmt>(Stmt{Stmt::Kind::kSet});
    s->target = ParseTarget(true);
    if (AcceptOp("=")) {
      s->expr = Expression();
      if (IsOp(",")) {  // set a = 1, 2: a tuple
        auto tuple = std::make_unique<Expr>(Expr{Expr::Kind::kTuple});
        tuple->items.push_back(std::move(s->expr));
        while (AcceptOp(",")) tuple->items.push_back(Expression());
        s->expr = Seal(std::move(tuple));
      }
      ExpectBlockEnd();
      return s;
    }
    if (s->target.names.size() != 1 || !s->target.attribute.empty()) SyntaxError(Peek().line, "expected '='");
    s->kind = Stmt::Kind::kSetBlock;
    ExpectBlockEnd();
    std::string end;
    s->body = Body({"endset"}, &end);
    ExpectBlockEnd();
    return s;
  }

  std::unique_ptr<Stmt> Macro() {
    auto s = std::make_unique<Stmt>(Stmt{Stmt::Kind::kMacro});
    s->text = ExpectName();
    ExpectOp("(");
    while (!AcceptOp(")")) {
      if (!s->params.empty()) ExpectOp(",");
      std::string name = ExpectName();
      ExprPtr def;
      if (AcceptOp("=")) def = Expression();
      s->params.emplace_back(std::move(name), std::move(def));
    }
    ExpectBlockEnd();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    std::string end;
    s->body = Body({"endmacro"}, &end);
    loop_depth_ = saved;
    if (Peek().type == T::kName) ++i_;  // {% endmacro name %}
    ExpectBlockEnd();
    return s;
  }

  std::unique_ptr<Stmt> Generation() {
    auto s = std::make_unique<Stmt>(Stmt{Stmt::Kind::kGeneration});
    ExpectBlockEnd();
    std::string end;
    const int saved = loop_depth_;  // a call block's body, as a macro's: break / continue cannot leave it
    loop_depth_ = 0;
    s->body = Body({"endgeneration"}, &end);
    loop_depth_ = saved;
    ExpectBlockEnd();
    return s;
  }

  // --- expressions ---

  static ExprPtr Node(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>(Expr{k});
    e->line = line;
    return e;
  }
  // A node whose children are in place: its depth, refused past kMaxExprDepth (chains built by
  // loops - a ~ b ~ c ..., x|f|g ..., x.a.b ... - nest as deep as they are long).
  static ExprPtr Seal(ExprPtr e) {
    int d = 0;
    for (const auto& c : e->items)
      if (c) d = std::max(d, c->depth);
    for (const auto& c : e->args) d = std::max(d, c->depth);
    for (const auto& [k, c] : e->kwargs) d = std::max(d, c->depth);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth)
      SyntaxError(e->line, "expression nested more than " + std::to_string(kMaxExprDepth) + " deep");
    return e;
  }
  static ExprPtr Binary(const std::string& op, ExprPtr a, ExprPtr b, int line) {
    auto e = Node(Expr::Kind::kBinary, line);
    e->name = op;
    e->items.push_back(std::move(a));
    e->items.push_back(std::move(b));
    return Seal(std::move(e));
  }

  // Every way an expression nests inside another passes here, Not or Unary: the parser's
  // recursion is bounded with the tree's depth.
  ExprPtr Expression(bool with_condexpr = true) {
    Nest nest(this);
    ExprPtr e = Or(with_condexpr);
    return e;
  }
  struct Nest {
    explicit Nest(Parser* p) : p_(p) {
      if (++p_->nesting_ > kMaxExprDepth)
        SyntaxError(p_->Peek().line, "expression nested more than " + std::to_string(kMaxExprDepth) + " deep");
    }
    ~Nest() { --p_->nesting_; }
    Parser* p_;
  };

  // operand (`word` operand)*, left-associative, as `kind` nodes (`or`, `and`).
  ExprPtr Logical(const char* word, Expr::Kind kind, ExprPtr (Parser::*operand)(), int line) {
    ExprPtr e = (this->*operand)();
    while (AcceptName(word)) {
      auto n = Node(kind, line);
      n->items.push_back(std::move(e));
      n->items.push_back((this->*operand)());
      e = Seal(std::move(n));
    }
    return e;
  }

  ExprPtr Or(bool with_condexpr) {
    const int line = Peek().line;
    ExprPtr e = Logical("or", Expr::Kind::kOr, &Parser::And, line);
    if (with_condexpr && IsName("if")) {
      ++i_;
      auto c = Node(Expr::Kind::kCondition, line);
      c->items.push_back(std::move(e));
      c->items.push_back(Or(false));
      c->items.push_back(AcceptName("else") ? Expression() : nullptr);
      return Seal(std::move(c));
    }
    return e;
  }

  ExprPtr And() { return Logical("and", Expr::Kind::kAnd, &Parser::Not, Peek().line); }

  ExprPtr Not() {
    if (IsName("not")) {
      Nest nest(this);
      const int line = Next().line;
      auto n = Node(Expr::Kind::kUnary, line);
      n->name = "not";
      n->items.push_back(Not());
      return Seal(std::move(n));
    }
    return Compare();
  }

  ExprPtr Compare() {
    const int line = Peek().line;
    ExprPtr e = Math1();
    for (;;) {
      std::string op;
      if (Peek().type == T::kOp && (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" || Peek().text == ">" ||
                                    Peek().text == "<=" || Peek().text == ">=")) {
        op = Next().text;
      } else if (IsName("in")) {
        ++i_;
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        i_ += 2;
        op = "not in";
      } else {
        return e;
      }
      e = Binary(op, std::move(e), Math1(), line);
    }
  }

  ExprPtr Math1() {
    ExprPtr e = Concat();
    while (IsOp("+") || IsOp("-")) {
      const Token& op = Next();
      e = Binary(op.text, std::move(e), Concat(), op.line);
    }
    return e;
  }

  ExprPtr Concat() {
    ExprPtr e = Math2();
    while (IsOp("~")) {
      const int line = Next().line;
      e = Binary("~", std::move(e), Math2(), line);
    }
    return e;
  }

  ExprPtr Math2() {
    ExprPtr e = Pow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token& op = Next();
      e = Binary(op.text, std::move(e), Pow(), op.line);
    }
    return e;
  }

  ExprPtr Pow() {
    ExprPtr e = Unary(true);
    while (IsOp("**")) {
      const int line = Next().line;
      e = Binary("**", std::move(e), Unary(true), line);
    }
    return e;
  }

  ExprPtr Unary(bool with_filter) {
    const int line = Peek().line;
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      Nest nest(this);
      auto u = Node(Expr::Kind::kUnary, line);
      u->name = Next().text;
      u->items.push_back(Unary(false));
      e = Seal(std::move(u));
    } else {
      e = Postfix(Primary());
    }
    if (with_filter) e = FilterAndTests(std::move(e));
    return e;
  }

  ExprPtr Primary() {
    const Token& tok = Next();
    const int line = tok.line;
    switch (tok.type) {
      case T::kName: {
        const std::string& n = tok.text;
        if (n == "true" || n == "True") return Literal(Value::Bool(true), line);
        if (n == "false" || n == "False") return Literal(Value::Bool(false), line);
        if (n == "none" || n == "None") return Literal(Value::None(), line);
        auto e = Node(Expr::Kind::kName, line);
        e->name = n;
        return e;
      }
      case T::kString: {
        std::string s = tok.text;
        while (Peek().type == T::kString) s += Next().text;  // adjacent literals concatenate
        return Literal(Value::String(std::move(s)), line);
      }
      case T::kInt: return Literal(Value::Int(std::strtoll(tok.text.c_str(), nullptr, 10)), line);
      case T::kFloat: return Literal(Value::Float(std::strtod(tok.text.c_str(), nullptr)), line);
      case T::kOp:
        if (tok.text == "(") return Parenthesised(line);
        if (tok.text == "[") return ListLiteral(line);
        if (tok.text == "{") return DictLiteral(line);
        break;
      default: break;
    }
    SyntaxError(line, "unexpected '" + Describe(tok) + "'");
  }

  static ExprPtr Literal(Value v, int line) {
    auto e = Node(Expr::Kind::kLiteral, line);
    e->value = std::move(v);
    return e;
  }

  ExprPtr Parenthesised(int line) {
    if (AcceptOp(")")) return Node(Expr::Kind::kTuple, line);
    ExprPtr first = Expression();
    if (AcceptOp(")")) return first;
    auto t = Node(Expr::Kind::kTuple, line);
    t->items.push_back(std::move(first));
    while (AcceptOp(",")) {
      if (IsOp(")")) break;
      t->items.push_back(Expression());
    }
    ExpectOp(")");
    return Seal(std::move(t));
  }

  ExprPtr ListLiteral(int line) { return Display(Expr::Kind::kList, "]", /*pairs=*/false, line); }
  ExprPtr DictLiteral(int line) { return Display(Expr::Kind::kDict, "}", /*pairs=*/true, line); }

  // [a, b, ...] or {k: v, ...} after its opening bracket: comma-separated items (a dict's keys
  // and values alternating) up to `close`, a trailing comma allowed.
  ExprPtr Display(Expr::Kind kind, const char* close, bool pairs, int line) {
    auto n = Node(kind, line);
    while (!AcceptOp(close)) {
      if (!n->items.empty()) {
        ExpectOp(",");
        if (AcceptOp(close)) break;
      }
      n->items.push_back(Expression());
      if (pairs) {
        ExpectOp(":");
        n->items.push_back(Expression());
      }
    }
    return Seal(std::move(n));
  }

  ExprPtr Postfix(ExprPtr e) {
    for (;;) {
      const int line = Peek().line;
      if (AcceptOp(".")) {
        auto a = Node(Expr::Kind::kAttr, line);
        if (Peek().type == T::kInt) {  // x.0 = x[0]
          a->kind = Expr::Kind::kSubscript;
          a->items.push_back(std::move(e));
          a->items.push_back(Literal(Value::Int(std::strtoll(Next().text.c_str(), nullptr, 10)), line));
        } else {
          a->name = ExpectName();
          a->items.push_back(std::move(e));
        }
        e = Seal(std::move(a));
      } else if (AcceptOp("[")) {
        e = Subscript(std::move(e), line);
      } else if (IsOp("(")) {
        ++i_;
        auto c = Node(Expr::Kind::kCall, line);
        c->items.push_back(std::move(e));
        Arguments(c.get());
        e = Seal(std::move(c));
      } else {
        return e;
      }
    }
  }

  ExprPtr Subscript(ExprPtr e, int line) {
    ExprPtr parts[3];
    int colons = 0;
    while (!IsOp("]")) {
      if (AcceptOp(":")) {
        if (++colons > 2) SyntaxError(line, "invalid slice");
        continue;
      }
      if (parts[colons]) SyntaxError(line, "expected ']'");
      parts[colons] = Expression();
    }
    ExpectOp("]");
    if (colons == 0) {
      if (!parts[0]) SyntaxError(line, "expected an index");
      auto s = Node(Expr::Kind::kSubscript, line);
      s->items.push_back(std::move(e));
      s->items.push_back(std::move(parts[0]));
      return Seal(std::move(s));
    }
    auto s = Node(Expr::Kind::kSlice, line);
    s->items.push_back(std::move(e));
    for (auto& p : parts) s->items.push_back(std::move(p));
    return Seal(std::move(s));
  }

  // After "(": positional and keyword arguments up to ")".
  void Arguments(Expr* call) {
    bool first = true;
    while (!AcceptOp(")")) {
      if (!first) {
        ExpectOp(",");
        if (AcceptOp(")")) break;
      }
      first = false;
      if (Peek().type == T::kName && IsOp("=", 1)) {
        std::string name = Next().text;
        ++i_;
        call->kwargs.emplace_back(std::move(name), Expression());
      } else {
        if (!call->kwargs.empty()) SyntaxError(Peek().line, "positional argument follows keyword argument");
        call->args.push_back(Expression());
      }
    }
  }

  ExprPtr FilterAndTests(ExprPtr e) {
    for (;;) {
      const int line = Peek().line;
      if (AcceptOp("|")) {
        auto f = Node(Expr::Kind::kFilter, line);
        f->name = ExpectName();
        while (AcceptOp(".")) f->name += "." + ExpectName();
        f->items.push_back(std::move(e));
        if (AcceptOp("(")) Arguments(f.get());
        e = Seal(std::move(f));
      } else if (IsName("is")) {
        ++i_;
        auto t = Node(Expr::Kind::kTest, line);
        t->negate = AcceptName("not");
        t->name = ExpectName();
        while (AcceptOp(".")) t->name += "." + ExpectName();
        t->items.push_back(std::move(e));
        if (AcceptOp("(")) {
          Arguments(t.get());
        } else if (StartsTestArgument()) {  // is divisibleby 3, is equalto 'x'
          t->args.push_back(Postfix(Primary()));
        }
        e = Seal(std::move(t));
      } else {
        return e;
      }
    }
  }

  bool StartsTestArgument() const {
    const Token& tok = Peek();
    if (tok.type == T::kString || tok.type == T::kInt || tok.type == T::kFloat) return true;
    if (tok.type == T::kOp) return tok.text == "[" || tok.text == "{";
    if (tok.type != T::kName) return false;
    static const char* const kStops[] = {"else", "or", "and", "not", "in", "is", "if"};
    for (const char* s : kStops)
      if (tok.text == s) return false;
    return true;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int loop_depth_ = 0;
  int blocks_ = 0;   // statement blocks open
  int nesting_ = 0;  // expressions open (the parser's recursion)
};

}  // namespace

StmtList ParseTemplate(std::string_view source) {
  // jinja2's lexer first splits the source on \r\n, \r and \n and joins the lines with \n: a
  // carriage return, in text or inside a string literal, reads as a newline.
  std::string normalized;
  if (source.find('\r') != std::string_view::npos) {
    normalized.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] != '\r') {
        normalized.push_back(source[i]);
        continue;
      }
      normalized.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    }
    source = normalized;
  }
  Lexer lexer(source);
  Parser parser(lexer.Run());
  return parser.Template();
}

}  // namespace radixlm::jinja
