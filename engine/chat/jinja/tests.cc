// jinja2's `is` tests.
#include <unordered_map>

#include "engine/chat/jinja/builtins.h"
#include "engine/chat/jinja/filters.h"
#include "engine/chat/jinja/py_string.h"

namespace gemma::jinja {
namespace {

using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

const Value& Arg0(const CallArgs& args, const char* test) {
  const Value* v = args.Get("", 0);
  if (v == nullptr) Fail(ErrorKind::kType, std::string("test '") + test + "' requires an argument");
  return *v;
}

bool IsInt(const Value& v) { return v.kind() == Kind::kInt; }

int64_t Modulo(const Value& v, int64_t n) {
  return Arithmetic("%", v, Value::Int(n)).int_value();
}

const std::unordered_map<std::string, TestFn>& Tests() {
  static const auto* tests = new std::unordered_map<std::string, TestFn>{
      {"defined", [](Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"none", [](Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }},
      {"boolean", [](Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::kBool; }},
      {"true", [](Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::kBool && v.bool_value(); }},
      {"false", [](Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::kBool && !v.bool_value(); }},
      {"integer", [](Interpreter&, const Value& v, CallArgs&) { return IsInt(v); }},
      {"float", [](Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::kFloat; }},
      {"number", [](Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }},
      {"string", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }},
      {"mapping", [](Interpreter&, const Value& v, CallArgs&) { return v.is_dict(); }},
      {"sequence", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() || v.is_sequence() || v.is_dict(); }},
      {"iterable", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() || v.is_sequence() || v.is_dict(); }},
      {"callable", [](Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::kCallable; }},
      {"odd", [](Interpreter&, const Value& v, CallArgs&) { return Modulo(v, 2) == 1; }},
      {"even", [](Interpreter&, const Value& v, CallArgs&) { return Modulo(v, 2) == 0; }},
      {"divisibleby", [](Interpreter&, const Value& v, CallArgs& a) { return Arithmetic("%", v, Arg0(a, "divisibleby")).AsDouble() == 0; }},
      {"eq", [](Interpreter&, const Value& v, CallArgs& a) { return PyEquals(v, Arg0(a, "eq")); }},
      {"ne", [](Interpreter&, const Value& v, CallArgs& a) { return !PyEquals(v, Arg0(a, "ne")); }},
      {"lt", [](Interpreter&, const Value& v, CallArgs& a) { return PyLess(v, Arg0(a, "lt")); }},
      {"gt", [](Interpreter&, const Value& v, CallArgs& a) { return PyLess(Arg0(a, "gt"), v); }},
      {"le", [](Interpreter&, const Value& v, CallArgs& a) { return !PyLess(Arg0(a, "le"), v); }},
      {"ge", [](Interpreter&, const Value& v, CallArgs& a) { return !PyLess(v, Arg0(a, "ge")); }},
      {"in", [](Interpreter&, const Value& v, CallArgs& a) { return Contains(Arg0(a, "in"), v); }},
      {"lower", [](Interpreter&, const Value& v, CallArgs&) { return PyIsLower(v.Str()); }},
      {"upper", [](Interpreter&, const Value& v, CallArgs&) { return PyIsUpper(v.Str()); }},
      {"sameas", [](Interpreter&, const Value& v, CallArgs& a) {
         const Value& o = Arg0(a, "sameas");
         return v.kind() == o.kind() && (v.is_none() || v.is_undefined() || (v.kind() == Kind::kBool && v.bool_value() == o.bool_value()));
       }},
  };
  return *tests;
}

const std::unordered_map<std::string, std::string>& TestAliases() {
  static const auto* aliases = new std::unordered_map<std::string, std::string>{
      {"==", "eq"}, {"equalto", "eq"}, {"!=", "ne"}, {"<", "lt"}, {"lessthan", "lt"}, {">", "gt"},
      {"greaterthan", "gt"}, {"<=", "le"}, {">=", "ge"}};
  return *aliases;
}

}  // namespace

bool PyIsLower(const std::string& s) {
  bool cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    std::string one;
    AppendUtf8(c, one);
    if (PyUpper(one) != one) cased = true;
    if (PyLower(one) != one) return false;
  }
  return cased;
}

bool PyIsUpper(const std::string& s) {
  bool cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    std::string one;
    AppendUtf8(c, one);
    if (PyLower(one) != one) cased = true;
    if (PyUpper(one) != one) return false;
  }
  return cased;
}

bool IsKnownTest(const std::string& name) { return Tests().count(name) > 0 || TestAliases().count(name) > 0; }

bool ApplyTest(Interpreter& interp, const std::string& name, const Value& input, CallArgs& args) {
  auto alias = TestAliases().find(name);
  auto it = Tests().find(alias == TestAliases().end() ? name : alias->second);
  if (it == Tests().end()) Fail(ErrorKind::kSyntax, "No test named " + PyStrRepr(name) + ".");
  return it->second(interp, input, args);
}

}  // namespace gemma::jinja
