// Token cursor and expression grammar shared by the statement parser.
#ifndef GEMMA_ENGINE_CHAT_JINJA_EXPR_PARSER_H_
#define GEMMA_ENGINE_CHAT_JINJA_EXPR_PARSER_H_

#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/jinja/ast.h"
#include "engine/chat/jinja/lexer.h"

namespace gemma::jinja {

class TokenStream {
 public:
  explicit TokenStream(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  const Token& Peek(size_t ahead = 0) const;
  const Token& Next();
  bool IsOp(std::string_view op, size_t ahead = 0) const;
  bool IsName(std::string_view name, size_t ahead = 0) const;
  bool SkipOp(std::string_view op);
  bool SkipName(std::string_view name);
  void ExpectOp(std::string_view op);
  std::string ExpectName();
  void Expect(TokenType type);
  [[noreturn]] void Fail(const std::string& message) const;

 private:
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

class ExprParser {
 public:
  explicit ExprParser(TokenStream& tokens) : ts_(tokens) {}

  ExprPtr ParseExpression(bool with_condexpr = true);
  // A comma-separated tuple or a single expression; stops before `extra_end` names.
  ExprPtr ParseTuple(bool with_condexpr = true, std::string_view extra_end = "", bool explicit_parens = false);
  // `name(args) | name2 ...` applied to `input` (null inside {% filter %}).
  ExprPtr ParseFilterChain(ExprPtr input, bool start_inline);
  std::vector<Arg> ParseCallArgs();

 private:
  ExprPtr ParseCondition();
  ExprPtr ParseBinaryLevel(int level);
  ExprPtr ParseNot();
  ExprPtr ParseCompare();
  ExprPtr ParseConcat();
  ExprPtr ParseUnary(bool with_filter);
  ExprPtr ParsePrimary();
  ExprPtr ParsePostfix(ExprPtr node);
  ExprPtr ParseFilterExpr(ExprPtr node);
  ExprPtr ParseSubscript(ExprPtr node);
  ExprPtr ParseSubscribed();
  ExprPtr ParseFilter(ExprPtr node, bool start_inline);
  ExprPtr ParseTest(ExprPtr node);
  ExprPtr ParseList();
  ExprPtr ParseDict();
  bool IsTupleEnd(std::string_view extra_end) const;

  TokenStream& ts_;
};

ExprPtr MakeExpr(ExprKind kind, int line);

}  // namespace gemma::jinja

#endif  // GEMMA_ENGINE_CHAT_JINJA_EXPR_PARSER_H_
