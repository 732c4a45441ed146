// Expression evaluation half of the Interpreter.
#include "engine/chat/jinja/builtins.h"
#include "engine/chat/jinja/filters.h"
#include "engine/chat/jinja/interpreter.h"
#include <algorithm>

#include "engine/chat/jinja/py_string.h"

namespace gemma::jinja {
namespace {

// Python's slice.indices(): clamps start/stop for `length` items and `step`.
void SliceIndices(int64_t length, int64_t step, const Value& start_v, const Value& stop_v, int64_t& start,
                  int64_t& stop) {
  auto clamp = [&](const Value& v, int64_t fallback) {
    if (v.is_none() || v.is_undefined()) return fallback;
    int64_t i = v.int_value();
    if (i < 0) i += length;
    if (step > 0) return std::clamp<int64_t>(i, 0, length);
    return std::clamp<int64_t>(i, -1, length - 1);
  };
  start = clamp(start_v, step > 0 ? 0 : length - 1);
  stop = clamp(stop_v, step > 0 ? length : -1);
}

}  // namespace

Value Interpreter::Eval(const Expr& expr, const ScopePtr& scope) {
  switch (expr.kind) {
    case ExprKind::kLiteral: return expr.literal;
    case ExprKind::kName: return EvalName(expr, scope);
    case ExprKind::kList:
    case ExprKind::kTuple:
    case ExprKind::kDict: return EvalCollection(expr, scope);
    case ExprKind::kGetAttr: {
      const Value obj = Eval(*expr.children[0], scope);
      if (obj.is_undefined()) obj.FailUndefined();
      return GetAttribute(obj, expr.name);
    }
    case ExprKind::kGetItem: {
      const Value obj = Eval(*expr.children[0], scope);
      if (obj.is_undefined()) obj.FailUndefined();
      return GetItem(obj, Eval(*expr.children[1], scope));
    }
    case ExprKind::kSlice: return EvalSlice(expr, scope);
    case ExprKind::kCall: {
      const Value callee = Eval(*expr.children[0], scope);
      CallArgs args = EvalArgs(expr.args, scope);
      return Call(callee, args);
    }
    case ExprKind::kFilter: return ApplyFilterChain(*this, expr, Value(), scope);
    case ExprKind::kTest: {
      const Value input = Eval(*expr.children[0], scope);
      CallArgs args = EvalArgs(expr.args, scope);
      return Value::Bool(ApplyTest(*this, expr.name, input, args) != expr.negated);
    }
    case ExprKind::kUnary: return EvalUnary(expr, scope);
    case ExprKind::kBinary: return EvalBinary(expr, scope);
    case ExprKind::kCompare: return EvalCompare(expr, scope);
    case ExprKind::kCondition: return EvalCondition(expr, scope);
  }
  return Value();
}

Value Interpreter::EvalName(const Expr& expr, const ScopePtr& scope) {
  const Value* found = scope->Find(expr.name);
  if (found != nullptr) return *found;
  return Value::Undefined(PyStrRepr(expr.name) + " is undefined");
}

Value Interpreter::EvalCollection(const Expr& expr, const ScopePtr& scope) {
  if (expr.kind == ExprKind::kDict) {
    Dict dict;
    for (size_t i = 0; i + 1 < expr.children.size(); i += 2) {
      const Value key = Eval(*expr.children[i], scope);
      if (!key.is_string()) Fail(ErrorKind::kType, "unsupported construct: dict literal with a non-string key");
      dict.Set(key.str(), Eval(*expr.children[i + 1], scope));
    }
    return Value::MakeDict(std::move(dict));
  }
  ValueList items;
  items.reserve(expr.children.size());
  for (const auto& child : expr.children) items.push_back(Eval(*child, scope));
  return expr.kind == ExprKind::kList ? Value::List(std::move(items)) : Value::Tuple(std::move(items));
}

CallArgs Interpreter::EvalArgs(const std::vector<Arg>& args, const ScopePtr& scope) {
  CallArgs out;
  for (const Arg& arg : args) {
    if (arg.name.empty()) {
      out.positional.push_back(Eval(*arg.value, scope));
    } else {
      out.keyword.emplace_back(arg.name, Eval(*arg.value, scope));
    }
  }
  return out;
}

Value Interpreter::EvalUnary(const Expr& expr, const ScopePtr& scope) {
  const Value operand = Eval(*expr.children[0], scope);
  if (expr.name == "not") return Value::Bool(!operand.Truthy());
  if (operand.is_undefined()) operand.FailUndefined();
  if (!operand.is_number()) {
    Fail(ErrorKind::kType, "bad operand type for unary " + expr.name + ": '" + operand.TypeName() + "'");
  }
  if (expr.name == "+") return operand.kind() == Kind::kBool ? Value::Int(operand.int_value()) : operand;
  if (operand.kind() == Kind::kFloat) return Value::Float(-operand.AsDouble());
  return Value::Int(-operand.int_value());
}

Value Interpreter::EvalBinary(const Expr& expr, const ScopePtr& scope) {
  Value left = Eval(*expr.children[0], scope);
  if (expr.name == "and") return left.Truthy() ? Eval(*expr.children[1], scope) : left;
  if (expr.name == "or") return left.Truthy() ? left : Eval(*expr.children[1], scope);
  const Value right = Eval(*expr.children[1], scope);
  if (expr.name == "~") return Value::String(left.Str() + right.Str());
  return Arithmetic(expr.name, left, right);
}

Value Interpreter::EvalCompare(const Expr& expr, const ScopePtr& scope) {
  Value left = Eval(*expr.children[0], scope);
  for (size_t i = 0; i < expr.ops.size(); ++i) {
    Value right = Eval(*expr.children[i + 1], scope);
    const std::string& op = expr.ops[i];
    bool result = false;
    if (op == "==") result = PyEquals(left, right);
    else if (op == "!=") result = !PyEquals(left, right);
    else if (op == "<") result = PyLess(left, right);
    else if (op == ">") result = PyLess(right, left);
    else if (op == "<=") result = PyLess(left, right) || PyEquals(left, right);
    else if (op == ">=") result = PyLess(right, left) || PyEquals(left, right);
    else if (op == "in") result = Contains(right, left);
    else result = !Contains(right, left);
    if (!result) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

Value Interpreter::EvalCondition(const Expr& expr, const ScopePtr& scope) {
  if (Eval(*expr.children[1], scope).Truthy()) return Eval(*expr.children[0], scope);
  if (expr.children[2] != nullptr) return Eval(*expr.children[2], scope);
  return Value::Undefined("the inline if-expression on line " + std::to_string(expr.line) +
                          " evaluated to false and no else section was defined.");
}

Value Interpreter::EvalSlice(const Expr& expr, const ScopePtr& scope) {
  const Value target = Eval(*expr.children[0], scope);
  if (target.is_undefined()) target.FailUndefined();
  Value bounds[3];
  for (int i = 0; i < 3; ++i) {
    if (expr.children[i + 1] != nullptr) bounds[i] = Eval(*expr.children[i + 1], scope);
    if (!bounds[i].is_undefined() && !bounds[i].is_none() && bounds[i].kind() != Kind::kInt &&
        bounds[i].kind() != Kind::kBool) {
      Fail(ErrorKind::kType, "slice indices must be integers or None or have an __index__ method");
    }
  }
  const int64_t step = bounds[2].is_undefined() || bounds[2].is_none() ? 1 : bounds[2].int_value();
  if (step == 0) Fail(ErrorKind::kRuntime, "slice step cannot be zero");
  const bool is_string = target.is_string();
  if (!is_string && !target.is_sequence()) return Value::Undefined(ObjectTypeRepr(target) + " has no element slice");
  const std::u32string chars = is_string ? DecodeUtf8(target.str()) : std::u32string();
  const int64_t length = is_string ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(target.list().size());
  int64_t start = 0;
  int64_t stop = 0;
  SliceIndices(length, step, bounds[0], bounds[1], start, stop);
  std::u32string out_chars;
  ValueList out_items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (is_string) out_chars.push_back(chars[i]);
    else out_items.push_back(target.list()[i]);
  }
  if (is_string) return Value::String(EncodeUtf8(out_chars));
  return target.kind() == Kind::kTuple ? Value::Tuple(std::move(out_items)) : Value::List(std::move(out_items));
}

Value ApplyFilterChain(Interpreter& interp, const Expr& filter, const Value& innermost, const ScopePtr& scope) {
  const Expr* input_expr = filter.children[0].get();
  Value input = input_expr == nullptr ? innermost
                : input_expr->kind == ExprKind::kFilter ? ApplyFilterChain(interp, *input_expr, innermost, scope)
                                                         : interp.Eval(*input_expr, scope);
  CallArgs args;
  for (const Arg& arg : filter.args) {
    if (arg.name.empty()) args.positional.push_back(interp.Eval(*arg.value, scope));
    else args.keyword.emplace_back(arg.name, interp.Eval(*arg.value, scope));
  }
  return ApplyFilter(interp, filter.name, input, args);
}

}  // namespace gemma::jinja
