#include "engine/chat/jinja/parser.h"

#include <initializer_list>

#include "engine/chat/jinja/expr_parser.h"
#include "engine/chat/jinja/filters.h"
#include "engine/chat/jinja/lexer.h"

namespace gemma::jinja {
namespace {

std::unique_ptr<Stmt> MakeStmt(StmtKind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : ts_(std::move(tokens)), expr_(ts_) {}

  StmtList ParseAll() {
    std::string end;
    StmtList body = ParseBody({}, &end);
    return body;
  }

 private:
  // Parses statements until a block tag named in `ends`; consumes `{% name` and stores the name.
  StmtList ParseBody(std::initializer_list<std::string_view> ends, std::string* end) {
    StmtList body;
    while (true) {
      const Token& token = ts_.Peek();
      if (token.type == TokenType::kEof) {
        if (ends.size() == 0) return body;
        std::string expected;
        for (std::string_view e : ends) expected += (expected.empty() ? "'" : " or '") + std::string(e) + "'";
        ts_.Fail("unexpected end of template; expected " + expected);
      }
      if (token.type == TokenType::kText) {
        auto text = MakeStmt(StmtKind::kText, token.line);
        text->text = ts_.Next().value;
        body.push_back(std::move(text));
      } else if (token.type == TokenType::kVarBegin) {
        ts_.Next();
        auto print = MakeStmt(StmtKind::kPrint, token.line);
        print->expr = expr_.ParseTuple();
        ts_.Expect(TokenType::kVarEnd);
        body.push_back(std::move(print));
      } else {
        ts_.Expect(TokenType::kBlockBegin);
        for (std::string_view candidate : ends) {
          if (ts_.IsName(candidate)) {
            *end = ts_.Next().value;
            return body;
          }
        }
        body.push_back(ParseStatement());
      }
    }
  }

  std::unique_ptr<Stmt> ParseStatement() {
    const Token& token = ts_.Peek();
    if (token.type != TokenType::kName) ts_.Fail("tag name expected");
    const std::string& tag = token.value;
    if (tag == "if") return ParseIf();
    if (tag == "for") return ParseFor();
    if (tag == "set") return ParseSet();
    if (tag == "macro") return ParseMacro();
    if (tag == "filter") return ParseFilterBlock();
    if (tag == "break" || tag == "continue") {
      auto stmt = MakeStmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, ts_.Next().line);
      ts_.Expect(TokenType::kBlockEnd);
      return stmt;
    }
    static const char* const kUnsupported[] = {"include", "import", "from", "extends", "block", "call",
                                               "with", "autoescape", "do", "trans", "generation"};
    for (const char* name : kUnsupported) {
      if (tag == name) ts_.Fail("unsupported construct '{% " + tag + " %}'");
    }
    ts_.Fail("unknown tag '" + tag + "'");
  }

  std::unique_ptr<Stmt> ParseIf() {
    auto stmt = MakeStmt(StmtKind::kIf, ts_.Next().line);
    std::string end = "if";
    while (end != "endif") {
      Branch branch;
      if (end != "else") branch.condition = expr_.ParseTuple(false);
      ts_.Expect(TokenType::kBlockEnd);
      const bool is_else = end == "else";
      branch.body = is_else ? ParseBody({"endif"}, &end) : ParseBody({"elif", "else", "endif"}, &end);
      stmt->branches.push_back(std::move(branch));
    }
    ts_.Expect(TokenType::kBlockEnd);
    return stmt;
  }

  std::vector<std::string> ParseTargets() {
    std::vector<std::string> targets;
    const bool parens = ts_.SkipOp("(");
    do {
      if (parens && ts_.IsOp(")")) break;
      targets.push_back(ts_.ExpectName());
    } while (ts_.SkipOp(","));
    if (parens) ts_.ExpectOp(")");
    return targets;
  }

  std::unique_ptr<Stmt> ParseFor() {
    auto stmt = MakeStmt(StmtKind::kFor, ts_.Next().line);
    stmt->targets = ParseTargets();
    if (!ts_.SkipName("in")) ts_.Fail("expected 'in' in for loop");
    stmt->expr = expr_.ParseTuple(false, "recursive");
    if (ts_.SkipName("if")) stmt->condition = expr_.ParseExpression();
    if (ts_.IsName("recursive")) ts_.Fail("unsupported construct 'recursive for loop'");
    ts_.Expect(TokenType::kBlockEnd);
    std::string end;
    stmt->body = ParseBody({"endfor", "else"}, &end);
    if (end == "else") {
      ts_.Expect(TokenType::kBlockEnd);
      stmt->else_body = ParseBody({"endfor"}, &end);
    }
    ts_.Expect(TokenType::kBlockEnd);
    return stmt;
  }

  std::unique_ptr<Stmt> ParseSet() {
    auto stmt = MakeStmt(StmtKind::kSet, ts_.Next().line);
    if (ts_.Peek().type == TokenType::kName && ts_.IsOp(".", 1)) {
      stmt->targets.push_back(ts_.Next().value);
      ts_.Next();
      stmt->attr = ts_.ExpectName();
    } else {
      stmt->targets = ParseTargets();
    }
    if (ts_.SkipOp("=")) {
      stmt->expr = expr_.ParseTuple();
      ts_.Expect(TokenType::kBlockEnd);
      return stmt;
    }
    if (stmt->targets.size() != 1 || !stmt->attr.empty()) ts_.Fail("block set takes a single name");
    stmt->kind = StmtKind::kSetBlock;
    if (ts_.IsOp("|")) stmt->expr = expr_.ParseFilterChain(nullptr, false);
    ts_.Expect(TokenType::kBlockEnd);
    std::string end;
    stmt->body = ParseBody({"endset"}, &end);
    ts_.Expect(TokenType::kBlockEnd);
    return stmt;
  }

  std::unique_ptr<Stmt> ParseMacro() {
    auto stmt = MakeStmt(StmtKind::kMacro, ts_.Next().line);
    stmt->name = ts_.ExpectName();
    ts_.ExpectOp("(");
    while (!ts_.IsOp(")")) {
      if (!stmt->params.empty()) ts_.ExpectOp(",");
      if (ts_.IsOp(")")) break;
      stmt->params.push_back(ts_.ExpectName());
      if (ts_.SkipOp("=")) {
        stmt->defaults.push_back(expr_.ParseExpression());
      } else {
        if (!stmt->defaults.empty() && stmt->defaults.back()) ts_.Fail("non-default argument follows default argument");
        stmt->defaults.push_back(nullptr);
      }
    }
    ts_.ExpectOp(")");
    ts_.Expect(TokenType::kBlockEnd);
    std::string end;
    stmt->body = ParseBody({"endmacro"}, &end);
    if (ts_.Peek().type == TokenType::kName) ts_.Next();
    ts_.Expect(TokenType::kBlockEnd);
    return stmt;
  }

  std::unique_ptr<Stmt> ParseFilterBlock() {
    auto stmt = MakeStmt(StmtKind::kFilterBlock, ts_.Next().line);
    stmt->expr = expr_.ParseFilterChain(nullptr, true);
    ts_.Expect(TokenType::kBlockEnd);
    std::string end;
    stmt->body = ParseBody({"endfilter"}, &end);
    ts_.Expect(TokenType::kBlockEnd);
    return stmt;
  }

  TokenStream ts_;
  ExprParser expr_;
};

// jinja2 rejects unknown filters and tests when compiling; so do we.
void ValidateExpr(const Expr* expr) {
  if (expr == nullptr) return;
  if (expr->kind == ExprKind::kFilter && !IsKnownFilter(expr->name)) {
    throw TemplateError{ErrorKind::kSyntax, "unsupported construct: no filter named '" + expr->name + "'", expr->line};
  }
  if (expr->kind == ExprKind::kTest && !IsKnownTest(expr->name)) {
    throw TemplateError{ErrorKind::kSyntax, "unsupported construct: no test named '" + expr->name + "'", expr->line};
  }
  for (const auto& child : expr->children) ValidateExpr(child.get());
  for (const Arg& arg : expr->args) ValidateExpr(arg.value.get());
}

void ValidateBody(const StmtList& body) {
  for (const auto& stmt : body) {
    ValidateExpr(stmt->expr.get());
    ValidateExpr(stmt->condition.get());
    for (const Branch& branch : stmt->branches) {
      ValidateExpr(branch.condition.get());
      ValidateBody(branch.body);
    }
    for (const auto& d : stmt->defaults) ValidateExpr(d.get());
    ValidateBody(stmt->body);
    ValidateBody(stmt->else_body);
  }
}

}  // namespace

StmtList ParseTemplate(std::string_view source) {
  Parser parser(Tokenize(source));
  StmtList program = parser.ParseAll();
  ValidateBody(program);
  return program;
}

}  // namespace gemma::jinja
