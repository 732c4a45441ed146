// Syntax tree of a parsed template. Nodes are immutable after parsing, so one tree serves
// concurrent renders.
#ifndef GEMMA_ENGINE_CHAT_JINJA_AST_H_
#define GEMMA_ENGINE_CHAT_JINJA_AST_H_

#include <memory>
#include <string>
#include <vector>

#include "engine/chat/jinja/value.h"

namespace gemma::jinja {

enum class ExprKind {
  kLiteral,   // literal
  kName,      // name
  kList,      // children = items
  kTuple,     // children = items
  kDict,      // children = key0, value0, key1, value1, ...
  kGetAttr,   // children[0].name
  kGetItem,   // children[0][children[1]]
  kSlice,     // children[0][children[1]:children[2]:children[3]] (null = omitted)
  kCall,      // children[0](args)
  kFilter,    // children[0] | name(args); children[0] null inside {% filter %}
  kTest,      // children[0] is [not] name(args)
  kUnary,     // name in {"-", "+", "not"}, children[0]
  kBinary,    // children[0] name children[1]; name in + - * / // % ** ~ and or
  kCompare,   // children[0] ops[0] children[1] ops[1] children[2] ...
  kCondition, // children = {then, condition, else (may be null)}
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Arg {
  std::string name;  // empty for positional
  ExprPtr value;
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<Arg> args;
  std::vector<std::string> ops;
  bool negated = false;
};

enum class StmtKind {
  kText,      // text
  kPrint,     // expr
  kIf,        // branches (condition null = else)
  kFor,       // targets in expr [if condition] body [else else_body]
  kSet,       // targets (or ns.attr when attr non-empty) = expr
  kSetBlock,  // targets[0] = rendered body
  kMacro,     // name(params = defaults) body
  kBreak,
  kContinue,
  kFilterBlock,  // expr (a kFilter chain with a null innermost input) applied to rendered body
};

struct Stmt;
using StmtList = std::vector<std::unique_ptr<Stmt>>;

struct Branch {
  ExprPtr condition;
  StmtList body;
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<Branch> branches;
  std::vector<std::string> targets;
  std::string attr;
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param, null when none
  StmtList body;
  StmtList else_body;
};

}  // namespace gemma::jinja

#endif  // GEMMA_ENGINE_CHAT_JINJA_AST_H_
