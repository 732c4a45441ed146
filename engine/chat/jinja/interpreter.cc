#include "engine/chat/jinja/interpreter.h"

#include "engine/chat/jinja/builtins.h"
#include "engine/chat/jinja/filters.h"
#include "engine/chat/jinja/py_string.h"

namespace gemma::jinja {
namespace {

constexpr int kMaxMacroDepth = 256;

Value MakeLoop(size_t index, const ValueList& items) {
  const int64_t length = static_cast<int64_t>(items.size());
  const int64_t i = static_cast<int64_t>(index);
  Dict loop;
  loop.Set("index0", Value::Int(i));
  loop.Set("index", Value::Int(i + 1));
  loop.Set("revindex0", Value::Int(length - i - 1));
  loop.Set("revindex", Value::Int(length - i));
  loop.Set("first", Value::Bool(i == 0));
  loop.Set("last", Value::Bool(i == length - 1));
  loop.Set("length", Value::Int(length));
  loop.Set("depth", Value::Int(1));
  loop.Set("depth0", Value::Int(0));
  if (i > 0) loop.Set("previtem", items[index - 1]);
  if (i + 1 < length) loop.Set("nextitem", items[index + 1]);
  return Value::MakeDict(std::move(loop));
}

}  // namespace

const Value* Scope::Find(std::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
    for (const auto& [key, value] : s->vars_) {
      if (key == name) return &value;
    }
  }
  return nullptr;
}

void Scope::Set(const std::string& name, Value value) {
  for (auto& [key, existing] : vars_) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  vars_.emplace_back(name, std::move(value));
}

void AssignTargets(const std::vector<std::string>& targets, const Value& value, Scope& scope) {
  if (targets.size() == 1) return scope.Set(targets[0], value);
  const ValueList items = value.Iterate();
  if (items.size() != targets.size()) {
    const bool too_many = items.size() > targets.size();
    Fail(ErrorKind::kType, too_many ? "too many values to unpack (expected " + std::to_string(targets.size()) + ")"
                                    : "not enough values to unpack (expected " + std::to_string(targets.size()) +
                                          ", got " + std::to_string(items.size()) + ")");
  }
  for (size_t i = 0; i < targets.size(); ++i) scope.Set(targets[i], items[i]);
}

Interpreter::Interpreter() : globals_(std::make_shared<Scope>(nullptr)) {
  const Dict globals = MakeGlobals();
  for (const auto& [name, value] : globals.entries()) globals_->Set(name, value);
}

std::string Interpreter::Render(const StmtList& program, const Dict& context) {
  auto root = std::make_shared<Scope>(globals_);
  for (const auto& [name, value] : context.entries()) root->Set(name, value);
  std::string out;
  Exec(program, root, out);
  return out;
}

Interpreter::Flow Interpreter::Exec(const StmtList& body, const ScopePtr& scope, std::string& out) {
  for (const auto& stmt : body) {
    try {
      const Flow flow = ExecStmt(*stmt, scope, out);
      if (flow != Flow::kNormal) return flow;
    } catch (TemplateError& e) {
      if (e.line == 0) e.line = stmt->line;
      throw;
    }
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::ExecStmt(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
  Flow flow = Flow::kNormal;
  switch (stmt.kind) {
    case StmtKind::kText: out += stmt.text; break;
    case StmtKind::kPrint: out += Eval(*stmt.expr, scope).Str(); break;
    case StmtKind::kIf: ExecIf(stmt, scope, out, flow); break;
    case StmtKind::kFor: ExecFor(stmt, scope, out, flow); break;
    case StmtKind::kSet:
    case StmtKind::kSetBlock: ExecSet(stmt, scope, out); break;
    case StmtKind::kMacro: DefineMacro(stmt, scope); break;
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kFilterBlock: {
      std::string body;
      Exec(stmt.body, scope, body);
      CallArgs no_args;
      out += ApplyFilterChain(*this, *stmt.expr, Value::String(std::move(body)), scope).Str();
      break;
    }
  }
  return flow;
}

void Interpreter::ExecIf(const Stmt& stmt, const ScopePtr& scope, std::string& out, Flow& flow) {
  for (const Branch& branch : stmt.branches) {
    if (branch.condition == nullptr || Eval(*branch.condition, scope).Truthy()) {
      flow = Exec(branch.body, scope, out);
      return;
    }
  }
}

ValueList Interpreter::FilteredItems(const Stmt& stmt, const ScopePtr& scope) {
  const Value iterable = Eval(*stmt.expr, scope);
  if (iterable.is_none() || iterable.is_number() || iterable.kind() == Kind::kCallable) {
    Fail(ErrorKind::kType, "'" + iterable.TypeName() + "' object is not iterable");
  }
  ValueList items = iterable.Iterate();
  if (stmt.condition == nullptr) return items;
  ValueList kept;
  for (Value& item : items) {
    auto probe = std::make_shared<Scope>(scope);
    AssignTargets(stmt.targets, item, *probe);
    if (Eval(*stmt.condition, probe).Truthy()) kept.push_back(std::move(item));
  }
  return kept;
}

void Interpreter::ExecFor(const Stmt& stmt, const ScopePtr& scope, std::string& out, Flow& flow) {
  const ValueList items = FilteredItems(stmt, scope);
  for (size_t i = 0; i < items.size(); ++i) {
    auto iteration = std::make_shared<Scope>(scope);
    AssignTargets(stmt.targets, items[i], *iteration);
    iteration->Set("loop", MakeLoop(i, items));
    if (Exec(stmt.body, iteration, out) == Flow::kBreak) break;
  }
  if (items.empty() && !stmt.else_body.empty()) {
    flow = Exec(stmt.else_body, std::make_shared<Scope>(scope), out);
  }
}

void Interpreter::ExecSet(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
  Value value;
  if (stmt.kind == StmtKind::kSetBlock) {
    std::string body;
    Exec(stmt.body, scope, body);
    value = Value::String(std::move(body));
    if (stmt.expr != nullptr) value = ApplyFilterChain(*this, *stmt.expr, value, scope);
  } else {
    value = Eval(*stmt.expr, scope);
  }
  if (stmt.attr.empty()) return AssignTargets(stmt.targets, value, *scope);
  const Value* target = scope->Find(stmt.targets[0]);
  if (target == nullptr || target->kind() != Kind::kNamespace) {
    Fail(ErrorKind::kRuntime, "cannot assign attribute on non-namespace object");
  }
  target->mutable_dict().Set(stmt.attr, std::move(value));
  (void)out;
}

void Interpreter::DefineMacro(const Stmt& stmt, const ScopePtr& scope) {
  const Stmt* macro = &stmt;
  std::weak_ptr<Scope> weak = scope;
  scope->Set(stmt.name, Value::Callable(stmt.name, [macro, weak](Interpreter& interp, CallArgs& args) {
               ScopePtr defining = weak.lock();
               if (defining == nullptr) Fail(ErrorKind::kRuntime, "macro '" + macro->name + "' outlived its scope");
               return interp.CallMacro(*macro, defining, args);
             }));
}

Value Interpreter::CallMacro(const Stmt& macro, const ScopePtr& defining, CallArgs& args) {
  const std::string quoted = "macro '" + macro.name + "'";
  if (args.positional.size() > macro.params.size()) {
    Fail(ErrorKind::kType, quoted + " takes not more than " + std::to_string(macro.params.size()) + " argument(s)");
  }
  for (const auto& [key, value] : args.keyword) {
    bool known = false;
    for (size_t i = 0; i < macro.params.size(); ++i) {
      if (macro.params[i] != key) continue;
      known = true;
      if (i < args.positional.size()) Fail(ErrorKind::kType, quoted + " got multiple values for argument '" + key + "'");
    }
    if (!known) Fail(ErrorKind::kType, quoted + " takes no keyword argument '" + key + "'");
  }
  auto scope = std::make_shared<Scope>(defining);
  for (size_t i = 0; i < macro.params.size(); ++i) {
    const Value* given = args.Get(macro.params[i], static_cast<int>(i));
    if (given != nullptr) {
      scope->Set(macro.params[i], *given);
    } else if (macro.defaults[i] != nullptr) {
      scope->Set(macro.params[i], Eval(*macro.defaults[i], scope));
    } else {
      scope->Set(macro.params[i], Value::Undefined("parameter " + PyStrRepr(macro.params[i]) + " was not provided"));
    }
  }
  if (++macro_depth_ > kMaxMacroDepth) Fail(ErrorKind::kRuntime, "maximum recursion depth exceeded");
  std::string out;
  try {
    Exec(macro.body, scope, out);
  } catch (...) {
    --macro_depth_;
    throw;
  }
  --macro_depth_;
  return Value::String(std::move(out));
}

Value Interpreter::Call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) callee.FailUndefined();
  if (callee.kind() != Kind::kCallable) Fail(ErrorKind::kType, "'" + callee.TypeName() + "' object is not callable");
  return callee.fn()(*this, args);
}

Value Interpreter::CallFilter(const std::string& name, const Value& input, CallArgs& args) {
  return ApplyFilter(*this, name, input, args);
}

bool Interpreter::CallTest(const std::string& name, const Value& input, CallArgs& args) {
  return ApplyTest(*this, name, input, args);
}

}  // namespace gemma::jinja
