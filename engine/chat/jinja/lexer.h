// Splits template source into text and tag tokens, applying jinja2's whitespace control with
// trim_blocks=True and lstrip_blocks=True (transformers' settings), newline normalization and
// the dropping of one trailing newline (keep_trailing_newline=False).
#ifndef GEMMA_ENGINE_CHAT_JINJA_LEXER_H_
#define GEMMA_ENGINE_CHAT_JINJA_LEXER_H_

#include <string>
#include <string_view>
#include <vector>

namespace gemma::jinja {

enum class TokenType {
  kText,        // literal template text (after whitespace control)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,      // value is the unescaped string
  kInt,
  kFloat,
  kOperator,    // value is the operator text
  kEof,
};

struct Token {
  TokenType type;
  std::string value;
  int line;
};

// Throws TemplateError (kSyntax) on unterminated tags, comments or strings.
std::vector<Token> Tokenize(std::string_view source);

// jinja2's description of a token in syntax errors ("end of print statement", "'x'").
std::string DescribeToken(const Token& token);

}  // namespace gemma::jinja

#endif  // GEMMA_ENGINE_CHAT_JINJA_LEXER_H_
