#include "engine/chat/jinja/lexer.h"

#include <cctype>
#include <optional>

#include "engine/chat/jinja/py_string.h"
#include "engine/chat/jinja/value.h"

namespace gemma::jinja {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// jinja2 normalizes \r\n and \r to \n and drops one trailing newline.
std::string NormalizeSource(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool AllPySpace(std::string_view s) {
  if (s.empty()) return false;
  for (char32_t c : DecodeUtf8(s)) {
    if (!IsPySpace(c)) return false;
  }
  return true;
}

int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's unicode-escape decoding of a string literal's body.
std::string Unescape(std::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    switch (c) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t width = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        char32_t code = 0;
        size_t k = 0;
        for (; k < width && i + 1 + k < body.size() && HexValue(body[i + 1 + k]) >= 0; ++k) {
          code = code * 16 + HexValue(body[i + 1 + k]);
        }
        if (k != width) Fail(ErrorKind::kSyntax, "truncated \\" + std::string(1, c) + " escape in string literal");
        AppendUtf8(code, out);
        i += width;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          char32_t code = c - '0';
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
            code = code * 8 + (body[++i] - '0');
          }
          AppendUtf8(code, out);
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(NormalizeSource(source)) {}

  std::vector<Token> Run() {
    while (pos_ < src_.size()) LexTextAndTag();
    tokens_.push_back({TokenType::kEof, "", line_});
    return std::move(tokens_);
  }

  int line() const { return line_; }

 private:
  bool At(size_t pos, std::string_view s) const { return src_.compare(pos, s.size(), s) == 0; }

  // Moves to `pos`, counting the newlines passed; remembers whether the last consumed char was one.
  void Advance(size_t pos) {
    for (size_t i = pos_; i < pos; ++i) line_ += src_[i] == '\n';
    if (pos > pos_) line_starting_ = src_[pos - 1] == '\n';
    pos_ = pos;
  }

  void SkipSpaces() {
    size_t p = pos_;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    Advance(p);
  }

  void Emit(TokenType type, std::string value) { tokens_.push_back({type, std::move(value), line_}); }

  // The end of `{% raw %}` / `{%- raw -%}` starting at `start`, or npos.
  size_t RawBeginEnd(size_t start) const {
    size_t p = start + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    if (!At(p, "raw")) return std::string::npos;
    p += 3;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    if (At(p, "-%}")) {
      p += 3;
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      return p;
    }
    return At(p, "%}") ? p + 2 : std::string::npos;
  }

  void LexTextAndTag() {
    size_t start = pos_;
    while (true) {
      start = src_.find('{', start);
      if (start == std::string::npos || start + 1 >= src_.size()) break;
      const char kind = src_[start + 1];
      if (kind == '{' || kind == '%' || kind == '#') break;
      ++start;
    }
    if (start == std::string::npos || start + 1 >= src_.size()) {
      Emit(TokenType::kText, src_.substr(pos_));
      Advance(src_.size());
      return;
    }
    const char kind = src_[start + 1];
    const char sign = start + 2 < src_.size() && (src_[start + 2] == '-' || src_[start + 2] == '+') ? src_[start + 2] : 0;
    std::string text = src_.substr(pos_, start - pos_);
    if (sign == '-') {
      text = PyStrip(text, std::nullopt, StripSide::kRight);
    } else if (sign != '+' && kind != '{') {
      const size_t line_begin = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if ((line_begin > 0 || line_starting_) && AllPySpace(std::string_view(text).substr(line_begin))) {
        text.resize(line_begin);
      }
    }
    if (!text.empty()) Emit(TokenType::kText, std::move(text));
    Advance(start);
    if (kind == '#') return LexComment();
    if (kind == '%') {
      const size_t raw_end = RawBeginEnd(start);
      if (raw_end != std::string::npos) return LexRaw(raw_end);
    }
    Advance(start + 2 + (sign != 0 ? 1 : 0));
    Emit(kind == '%' ? TokenType::kBlockBegin : TokenType::kVarBegin, "");
    LexExpression(kind == '%');
  }

  void LexComment() {
    size_t end = src_.find("#}", pos_ + 2);
    if (end == std::string::npos) Fail(ErrorKind::kSyntax, "missing end of comment tag");
    const size_t content_begin = pos_ + 2 + ((src_[pos_ + 2] == '-' || src_[pos_ + 2] == '+') ? 1 : 0);
    const char sign = end > content_begin ? src_[end - 1] : 0;
    Advance(end + 2);
    if (sign == '-') {
      SkipSpaces();
    } else if (sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      Advance(pos_ + 1);
    }
  }

  void LexRaw(size_t body_begin) {
    Advance(body_begin);
    size_t p = pos_;
    while (true) {
      p = src_.find("{%", p);
      if (p == std::string::npos) Fail(ErrorKind::kSyntax, "missing end of raw directive");
      size_t q = p + 2;
      const char sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      if (sign) ++q;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      if (!At(q, "endraw")) {
        p += 2;
        continue;
      }
      q += 6;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      std::string text = src_.substr(pos_, p - pos_);
      if (sign == '-') text = PyStrip(text, std::nullopt, StripSide::kRight);
      if (!text.empty()) Emit(TokenType::kText, std::move(text));
      return FinishRawEnd(q);
    }
  }

  void FinishRawEnd(size_t q) {
    if (At(q, "-%}")) {
      Advance(q + 3);
      SkipSpaces();
    } else if (At(q, "+%}")) {
      Advance(q + 3);
    } else if (At(q, "%}")) {
      Advance(q + 2);
      if (pos_ < src_.size() && src_[pos_] == '\n') Advance(pos_ + 1);
    } else {
      Fail(ErrorKind::kSyntax, "missing end of raw directive");
    }
  }

  // Returns true when a closing delimiter was consumed.
  bool LexEnd(bool block) {
    if (block) {
      if (At(pos_, "-%}")) {
        Advance(pos_ + 3);
        SkipSpaces();
      } else if (At(pos_, "+%}")) {
        Advance(pos_ + 3);
      } else if (At(pos_, "%}")) {
        Advance(pos_ + 2);
        if (pos_ < src_.size() && src_[pos_] == '\n') Advance(pos_ + 1);
      } else {
        return false;
      }
      Emit(TokenType::kBlockEnd, "");
      return true;
    }
    if (At(pos_, "-}}")) {
      Advance(pos_ + 3);
      SkipSpaces();
    } else if (At(pos_, "}}")) {
      Advance(pos_ + 2);
    } else {
      return false;
    }
    Emit(TokenType::kVarEnd, "");
    return true;
  }

  void LexExpression(bool block) {
    int depth = 0;
    while (true) {
      SkipSpaces();
      if (pos_ >= src_.size()) {
        Fail(ErrorKind::kSyntax, block ? "unexpected end of template, expected end of statement block"
                                       : "unexpected end of template, expected end of print statement");
      }
      if (depth == 0 && LexEnd(block)) return;
      const char c = src_[pos_];
      if (IsNameStart(c)) {
        LexName();
      } else if (IsDigit(c)) {
        LexNumber();
      } else if (c == '\'' || c == '"') {
        LexString(c);
      } else {
        LexOperator(depth);
      }
    }
  }

  void LexName() {
    size_t p = pos_;
    while (p < src_.size() && IsNameChar(src_[p])) ++p;
    Emit(TokenType::kName, src_.substr(pos_, p - pos_));
    Advance(p);
  }

  size_t ScanDigits(size_t p) const {
    while (p < src_.size() && (IsDigit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && IsDigit(src_[p + 1])))) ++p;
    return p;
  }

  void LexNumber() {
    size_t p = ScanDigits(pos_);
    bool is_float = false;
    const bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
    if (!after_dot && p + 1 < src_.size() && src_[p] == '.' && IsDigit(src_[p + 1])) {
      p = ScanDigits(p + 1);
      is_float = true;
    }
    if (!after_dot && p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && IsDigit(src_[q])) {
        p = ScanDigits(q);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = pos_; i < p; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    Emit(is_float ? TokenType::kFloat : TokenType::kInt, std::move(text));
    Advance(p);
  }

  void LexString(char quote) {
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) Fail(ErrorKind::kSyntax, "unexpected char " + PyStrRepr(std::string(1, quote)));
    Emit(TokenType::kString, Unescape(std::string_view(src_).substr(pos_ + 1, p - pos_ - 1)));
    Advance(p + 1);
  }

  void LexOperator(int& depth) {
    static const char* const kTwoChar[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwoChar) {
      if (At(pos_, op)) {
        Emit(TokenType::kOperator, op);
        Advance(pos_ + 2);
        return;
      }
    }
    const char c = src_[pos_];
    if (std::string_view("+-/*%~[](){}<>=.:|,;").find(c) == std::string_view::npos) {
      Fail(ErrorKind::kSyntax, "unexpected char " + PyStrRepr(std::string(1, c)));
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    Emit(TokenType::kOperator, std::string(1, c));
    Advance(pos_ + 1);
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> Tokenize(std::string_view source) {
  Lexer lexer(source);
  try {
    return lexer.Run();
  } catch (TemplateError& e) {
    e.line = lexer.line();
    throw;
  }
}

std::string DescribeToken(const Token& token) {
  switch (token.type) {
    case TokenType::kEof: return "end of template";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kVarEnd: return "end of print statement";
    case TokenType::kBlockBegin: return "begin of statement block";
    case TokenType::kVarBegin: return "begin of print statement";
    case TokenType::kText: return "template data";
    default: return "'" + token.value + "'";
  }
}

}  // namespace gemma::jinja
