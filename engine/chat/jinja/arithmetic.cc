// Python's binary arithmetic operators on template values.
#include <cmath>

#include "engine/chat/jinja/builtins.h"

namespace gemma::jinja {
namespace {

[[noreturn]] void Unsupported(const std::string& op, const Value& a, const Value& b) {
  Fail(ErrorKind::kType, "unsupported operand type(s) for " + op + ": '" + a.TypeName() + "' and '" + b.TypeName() + "'");
}

Value Repeat(const Value& seq, int64_t times) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.str();
    return Value::String(std::move(out));
  }
  ValueList out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.list().begin(), seq.list().end());
  return seq.kind() == Kind::kTuple ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

Value Concatenate(const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) return Value::String(a.str() + b.str());
  if (a.is_sequence() && a.kind() == b.kind()) {
    ValueList out = a.list();
    out.insert(out.end(), b.list().begin(), b.list().end());
    return a.kind() == Kind::kTuple ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
  }
  if (a.is_string() || a.is_sequence()) {
    Fail(ErrorKind::kType, "can only concatenate " + a.TypeName() + " (not \"" + b.TypeName() + "\") to " + a.TypeName());
  }
  Unsupported("+", a, b);
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Value IntegerOp(const std::string& op, int64_t x, int64_t y) {
  if (op == "+") return Value::Int(x + y);
  if (op == "-") return Value::Int(x - y);
  if (op == "*") return Value::Int(x * y);
  if (op == "/") {
    if (y == 0) Fail(ErrorKind::kRuntime, "division by zero");
    return Value::Float(static_cast<double>(x) / static_cast<double>(y));
  }
  if (op == "//" || op == "%") {
    if (y == 0) Fail(ErrorKind::kRuntime, "integer division or modulo by zero");
    const int64_t q = FloorDiv(x, y);
    return Value::Int(op == "//" ? q : x - q * y);
  }
  if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
  int64_t result = 1;
  for (int64_t i = 0; i < y; ++i) result *= x;
  return Value::Int(result);
}

Value FloatOp(const std::string& op, double x, double y) {
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "**") return Value::Float(std::pow(x, y));
  if (y == 0) Fail(ErrorKind::kRuntime, op == "/" ? "float division by zero" : op == "//" ? "float floor division by zero" : "float modulo");
  if (op == "/") return Value::Float(x / y);
  const double q = std::floor(x / y);
  if (op == "//") return Value::Float(q);
  double r = std::fmod(x, y);
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return Value::Float(r);
}

}  // namespace

Value Arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) a.FailUndefined();
  if (b.is_undefined()) b.FailUndefined();
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return FloatOp(op, a.AsDouble(), b.AsDouble());
    return IntegerOp(op, a.int_value(), b.int_value());
  }
  if (op == "+") return Concatenate(a, b);
  if (op == "*") {
    const bool a_int = a.kind() == Kind::kInt || a.kind() == Kind::kBool;
    const bool b_int = b.kind() == Kind::kInt || b.kind() == Kind::kBool;
    if ((a.is_string() || a.is_sequence()) && b_int) return Repeat(a, b.int_value());
    if ((b.is_string() || b.is_sequence()) && a_int) return Repeat(b, a.int_value());
  }
  if (op == "%" && a.is_string()) Fail(ErrorKind::kType, "unsupported construct: printf-style '%' formatting");
  Unsupported(op, a, b);
}

}  // namespace gemma::jinja
