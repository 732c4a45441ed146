#include "engine/chat/jinja/expr_parser.h"

#include <cstdlib>

namespace gemma::jinja {

ExprPtr MakeExpr(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

const Token& TokenStream::Peek(size_t ahead) const {
  return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
}

const Token& TokenStream::Next() {
  const Token& token = Peek();
  if (pos_ + 1 < tokens_.size()) ++pos_;
  return token;
}

bool TokenStream::IsOp(std::string_view op, size_t ahead) const {
  return Peek(ahead).type == TokenType::kOperator && Peek(ahead).value == op;
}

bool TokenStream::IsName(std::string_view name, size_t ahead) const {
  return Peek(ahead).type == TokenType::kName && Peek(ahead).value == name;
}

bool TokenStream::SkipOp(std::string_view op) {
  if (!IsOp(op)) return false;
  Next();
  return true;
}

bool TokenStream::SkipName(std::string_view name) {
  if (!IsName(name)) return false;
  Next();
  return true;
}

void TokenStream::ExpectOp(std::string_view op) {
  if (!SkipOp(op)) Fail("expected '" + std::string(op) + "', got " + DescribeToken(Peek()));
}

std::string TokenStream::ExpectName() {
  if (Peek().type != TokenType::kName) Fail("expected a name, got " + DescribeToken(Peek()));
  return Next().value;
}

void TokenStream::Expect(TokenType type) {
  if (Peek().type != type) {
    Fail("expected " + DescribeToken(Token{type, "", 0}) + ", got " + DescribeToken(Peek()));
  }
  Next();
}

void TokenStream::Fail(const std::string& message) const {
  throw TemplateError{ErrorKind::kSyntax, message, Peek().line};
}

bool ExprParser::IsTupleEnd(std::string_view extra_end) const {
  const Token& t = ts_.Peek();
  if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd || t.type == TokenType::kEof) return true;
  if (ts_.IsOp(")")) return true;
  return !extra_end.empty() && ts_.IsName(extra_end);
}

ExprPtr ExprParser::ParseTuple(bool with_condexpr, std::string_view extra_end, bool explicit_parens) {
  const int line = ts_.Peek().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) ts_.ExpectOp(",");
    if (IsTupleEnd(extra_end)) break;
    items.push_back(ParseExpression(with_condexpr));
    if (!ts_.IsOp(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) ts_.Fail("expected an expression, got " + DescribeToken(ts_.Peek()));
  }
  auto tuple = MakeExpr(ExprKind::kTuple, line);
  tuple->children = std::move(items);
  return tuple;
}

ExprPtr ExprParser::ParseExpression(bool with_condexpr) {
  return with_condexpr ? ParseCondition() : ParseBinaryLevel(0);
}

ExprPtr ExprParser::ParseCondition() {
  ExprPtr expr = ParseBinaryLevel(0);
  while (ts_.IsName("if")) {
    const int line = ts_.Next().line;
    auto cond = MakeExpr(ExprKind::kCondition, line);
    ExprPtr test = ParseBinaryLevel(0);
    ExprPtr otherwise = ts_.SkipName("else") ? ParseCondition() : nullptr;
    cond->children.push_back(std::move(expr));
    cond->children.push_back(std::move(test));
    cond->children.push_back(std::move(otherwise));
    expr = std::move(cond);
  }
  return expr;
}

// Levels: 0 `or`, 1 `and`, 2 `not` (unary), then comparisons, 3 `+ -`, 4 `~`, 5 `* / // %`, 6 `**`.
ExprPtr ExprParser::ParseBinaryLevel(int level) {
  if (level == 2) return ParseNot();
  if (level == 4) return ParseConcat();
  if (level == 7) return ParseUnary(true);
  static const std::vector<std::vector<std::string_view>> kOps = {
      {"or"}, {"and"}, {}, {"+", "-"}, {}, {"*", "/", "//", "%"}, {"**"}};
  const bool word = level <= 1;
  ExprPtr left = ParseBinaryLevel(level + 1);
  while (true) {
    std::string_view op;
    for (std::string_view candidate : kOps[level]) {
      if (word ? ts_.IsName(candidate) : ts_.IsOp(candidate)) op = candidate;
    }
    if (op.empty()) return left;
    const int line = ts_.Next().line;
    auto node = MakeExpr(ExprKind::kBinary, line);
    node->name = std::string(op);
    node->children.push_back(std::move(left));
    node->children.push_back(ParseBinaryLevel(level + 1));
    left = std::move(node);
  }
}

ExprPtr ExprParser::ParseNot() {
  if (ts_.IsName("not")) {
    const int line = ts_.Next().line;
    auto node = MakeExpr(ExprKind::kUnary, line);
    node->name = "not";
    node->children.push_back(ParseNot());
    return node;
  }
  return ParseCompare();
}

ExprPtr ExprParser::ParseCompare() {
  const int line = ts_.Peek().line;
  ExprPtr first = ParseBinaryLevel(3);
  std::vector<std::string> ops;
  std::vector<ExprPtr> operands;
  static const char* const kCompareOps[] = {"==", "!=", "<", "<=", ">", ">="};
  while (true) {
    std::string op;
    for (const char* candidate : kCompareOps) {
      if (ts_.IsOp(candidate)) op = candidate;
    }
    if (!op.empty()) {
      ts_.Next();
    } else if (ts_.SkipName("in")) {
      op = "in";
    } else if (ts_.IsName("not") && ts_.IsName("in", 1)) {
      ts_.Next();
      ts_.Next();
      op = "notin";
    } else {
      break;
    }
    ops.push_back(op);
    operands.push_back(ParseBinaryLevel(3));
  }
  if (ops.empty()) return first;
  auto node = MakeExpr(ExprKind::kCompare, line);
  node->children.push_back(std::move(first));
  for (auto& operand : operands) node->children.push_back(std::move(operand));
  node->ops = std::move(ops);
  return node;
}

ExprPtr ExprParser::ParseConcat() {
  ExprPtr left = ParseBinaryLevel(5);
  while (ts_.IsOp("~")) {
    const int line = ts_.Next().line;
    auto node = MakeExpr(ExprKind::kBinary, line);
    node->name = "~";
    node->children.push_back(std::move(left));
    node->children.push_back(ParseBinaryLevel(5));
    left = std::move(node);
  }
  return left;
}

ExprPtr ExprParser::ParseUnary(bool with_filter) {
  ExprPtr node;
  if (ts_.IsOp("-") || ts_.IsOp("+")) {
    const Token& op = ts_.Next();
    node = MakeExpr(ExprKind::kUnary, op.line);
    node->name = op.value;
    node->children.push_back(ParseUnary(false));
  } else {
    node = ParsePrimary();
  }
  node = ParsePostfix(std::move(node));
  return with_filter ? ParseFilterExpr(std::move(node)) : std::move(node);
}

ExprPtr ExprParser::ParsePrimary() {
  const Token& token = ts_.Peek();
  const int line = token.line;
  auto literal = [&](Value v) {
    auto node = MakeExpr(ExprKind::kLiteral, line);
    node->literal = std::move(v);
    return node;
  };
  if (token.type == TokenType::kName) {
    const std::string name = ts_.Next().value;
    if (name == "true" || name == "True") return literal(Value::Bool(true));
    if (name == "false" || name == "False") return literal(Value::Bool(false));
    if (name == "none" || name == "None") return literal(Value::None());
    auto node = MakeExpr(ExprKind::kName, line);
    node->name = name;
    return node;
  }
  if (token.type == TokenType::kString) {
    std::string text;
    while (ts_.Peek().type == TokenType::kString) text += ts_.Next().value;
    return literal(Value::String(std::move(text)));
  }
  if (token.type == TokenType::kInt) {
    return literal(Value::Int(std::strtoll(ts_.Next().value.c_str(), nullptr, 10)));
  }
  if (token.type == TokenType::kFloat) return literal(Value::Float(std::strtod(ts_.Next().value.c_str(), nullptr)));
  if (ts_.SkipOp("(")) {
    ExprPtr node = ParseTuple(true, "", true);
    ts_.ExpectOp(")");
    return node;
  }
  if (ts_.IsOp("[")) return ParseList();
  if (ts_.IsOp("{")) return ParseDict();
  ts_.Fail("unexpected " + DescribeToken(token));
}

ExprPtr ExprParser::ParseList() {
  auto node = MakeExpr(ExprKind::kList, ts_.Next().line);
  while (!ts_.IsOp("]")) {
    if (!node->children.empty()) ts_.ExpectOp(",");
    if (ts_.IsOp("]")) break;
    node->children.push_back(ParseExpression());
  }
  ts_.ExpectOp("]");
  return node;
}

ExprPtr ExprParser::ParseDict() {
  auto node = MakeExpr(ExprKind::kDict, ts_.Next().line);
  while (!ts_.IsOp("}")) {
    if (!node->children.empty()) ts_.ExpectOp(",");
    if (ts_.IsOp("}")) break;
    node->children.push_back(ParseExpression());
    ts_.ExpectOp(":");
    node->children.push_back(ParseExpression());
  }
  ts_.ExpectOp("}");
  return node;
}

ExprPtr ExprParser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (ts_.IsOp(".") || ts_.IsOp("[")) {
      node = ParseSubscript(std::move(node));
    } else if (ts_.IsOp("(")) {
      auto call = MakeExpr(ExprKind::kCall, ts_.Peek().line);
      call->children.push_back(std::move(node));
      call->args = ParseCallArgs();
      node = std::move(call);
    } else {
      return node;
    }
  }
}

ExprPtr ExprParser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (ts_.IsOp("|")) {
      node = ParseFilter(std::move(node), false);
    } else if (ts_.IsName("is")) {
      node = ParseTest(std::move(node));
    } else if (ts_.IsOp("(")) {
      auto call = MakeExpr(ExprKind::kCall, ts_.Peek().line);
      call->children.push_back(std::move(node));
      call->args = ParseCallArgs();
      node = std::move(call);
    } else {
      return node;
    }
  }
}

ExprPtr ExprParser::ParseSubscript(ExprPtr node) {
  const Token& op = ts_.Next();
  if (op.value == ".") {
    const Token& attr = ts_.Next();
    if (attr.type == TokenType::kName) {
      auto get = MakeExpr(ExprKind::kGetAttr, op.line);
      get->name = attr.value;
      get->children.push_back(std::move(node));
      return get;
    }
    if (attr.type != TokenType::kInt) ts_.Fail("expected name or number after '.'");
    auto get = MakeExpr(ExprKind::kGetItem, op.line);
    get->children.push_back(std::move(node));
    get->children.push_back(MakeExpr(ExprKind::kLiteral, op.line));
    get->children.back()->literal = Value::Int(std::strtoll(attr.value.c_str(), nullptr, 10));
    return get;
  }
  ExprPtr index = ParseSubscribed();
  ts_.ExpectOp("]");
  if (index->kind == ExprKind::kSlice) {
    index->children.insert(index->children.begin(), std::move(node));
    return index;
  }
  auto get = MakeExpr(ExprKind::kGetItem, op.line);
  get->children.push_back(std::move(node));
  get->children.push_back(std::move(index));
  return get;
}

// Returns an index expression, or a kSlice whose children are start, stop, step (target added later).
ExprPtr ExprParser::ParseSubscribed() {
  const int line = ts_.Peek().line;
  auto slice = MakeExpr(ExprKind::kSlice, line);
  if (ts_.SkipOp(":")) {
    slice->children.push_back(nullptr);
  } else {
    ExprPtr first = ParseExpression();
    if (!ts_.SkipOp(":")) return first;
    slice->children.push_back(std::move(first));
  }
  auto optional_expr = [&]() -> ExprPtr { return ts_.IsOp("]") || ts_.IsOp(",") || ts_.IsOp(":") ? nullptr : ParseExpression(); };
  slice->children.push_back(optional_expr());
  slice->children.push_back(ts_.SkipOp(":") ? optional_expr() : nullptr);
  return slice;
}

std::vector<Arg> ExprParser::ParseCallArgs() {
  ts_.ExpectOp("(");
  std::vector<Arg> args;
  while (!ts_.IsOp(")")) {
    if (!args.empty()) {
      ts_.ExpectOp(",");
      if (ts_.IsOp(")")) break;
    }
    if (ts_.IsOp("*") || ts_.IsOp("**")) ts_.Fail("unsupported construct '*args/**kwargs' in call");
    Arg arg;
    if (ts_.Peek().type == TokenType::kName && ts_.IsOp("=", 1)) {
      arg.name = ts_.Next().value;
      ts_.Next();
    } else if (!args.empty() && !args.back().name.empty()) {
      ts_.Fail("positional argument follows keyword argument");
    }
    arg.value = ParseExpression();
    args.push_back(std::move(arg));
  }
  ts_.ExpectOp(")");
  return args;
}

ExprPtr ExprParser::ParseFilter(ExprPtr node, bool start_inline) {
  while (ts_.IsOp("|") || start_inline) {
    if (!start_inline) ts_.Next();
    start_inline = false;
    auto filter = MakeExpr(ExprKind::kFilter, ts_.Peek().line);
    filter->name = ts_.ExpectName();
    while (ts_.SkipOp(".")) filter->name.append(".").append(ts_.ExpectName());
    if (ts_.IsOp("(")) filter->args = ParseCallArgs();
    filter->children.push_back(std::move(node));
    node = std::move(filter);
  }
  return node;
}

ExprPtr ExprParser::ParseFilterChain(ExprPtr input, bool start_inline) {
  return ParseFilter(std::move(input), start_inline);
}

ExprPtr ExprParser::ParseTest(ExprPtr node) {
  auto test = MakeExpr(ExprKind::kTest, ts_.Next().line);
  test->negated = ts_.SkipName("not");
  test->name = ts_.ExpectName();
  const Token& next = ts_.Peek();
  if (ts_.IsOp("(")) {
    test->args = ParseCallArgs();
  } else if ((next.type == TokenType::kName || next.type == TokenType::kString || next.type == TokenType::kInt ||
              next.type == TokenType::kFloat || ts_.IsOp("[") || ts_.IsOp("{")) &&
             !ts_.IsName("else") && !ts_.IsName("or") && !ts_.IsName("and")) {
    if (ts_.IsName("is")) ts_.Fail("You cannot chain multiple tests with is");
    Arg arg;
    arg.value = ParsePostfix(ParsePrimary());
    test->args.push_back(std::move(arg));
  }
  test->children.push_back(std::move(node));
  return test;
}

}  // namespace gemma::jinja
