// Tree-walking evaluator with jinja2's runtime semantics: scopes (a for-loop iteration and a
// macro call each get one; if-blocks do not), Undefined, loop controls and macros.
//
// Thread-safety: one Interpreter per render; the tree it walks is shared read-only.
#ifndef GEMMA_ENGINE_CHAT_JINJA_INTERPRETER_H_
#define GEMMA_ENGINE_CHAT_JINJA_INTERPRETER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/jinja/ast.h"
#include "engine/chat/jinja/value.h"

namespace gemma::jinja {

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}
  const Value* Find(std::string_view name) const;
  void Set(const std::string& name, Value value);

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  Interpreter();

  // Renders `program` with `context` as the template's variables. Throws TemplateError.
  std::string Render(const StmtList& program, const Dict& context);

  Value Eval(const Expr& expr, const ScopePtr& scope);
  Value Call(const Value& callee, CallArgs& args);
  // Applies filter or test `name` as used from a filter such as map('upper') or select('odd').
  Value CallFilter(const std::string& name, const Value& input, CallArgs& args);
  bool CallTest(const std::string& name, const Value& input, CallArgs& args);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow Exec(const StmtList& body, const ScopePtr& scope, std::string& out);
  Flow ExecStmt(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  void ExecIf(const Stmt& stmt, const ScopePtr& scope, std::string& out, Flow& flow);
  void ExecFor(const Stmt& stmt, const ScopePtr& scope, std::string& out, Flow& flow);
  ValueList FilteredItems(const Stmt& stmt, const ScopePtr& scope);
  void ExecSet(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  void DefineMacro(const Stmt& stmt, const ScopePtr& scope);
  Value CallMacro(const Stmt& macro, const ScopePtr& defining, CallArgs& args);

  Value EvalName(const Expr& expr, const ScopePtr& scope);
  Value EvalBinary(const Expr& expr, const ScopePtr& scope);
  Value EvalCompare(const Expr& expr, const ScopePtr& scope);
  Value EvalUnary(const Expr& expr, const ScopePtr& scope);
  Value EvalCondition(const Expr& expr, const ScopePtr& scope);
  Value EvalSlice(const Expr& expr, const ScopePtr& scope);
  Value EvalCollection(const Expr& expr, const ScopePtr& scope);
  CallArgs EvalArgs(const std::vector<Arg>& args, const ScopePtr& scope);

  ScopePtr globals_;
  int macro_depth_ = 0;
};

// Binds `targets` to `value` in `scope` (tuple unpacking when more than one target).
void AssignTargets(const std::vector<std::string>& targets, const Value& value, Scope& scope);

}  // namespace gemma::jinja

#endif  // GEMMA_ENGINE_CHAT_JINJA_INTERPRETER_H_
