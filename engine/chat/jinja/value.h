// Values of the Jinja interpreter: Python's object model cut down to what chat templates use.
//
// Lists, dicts and namespaces have reference semantics (as in Python), so a namespace assigned
// inside a loop is seen outside it. Dicts keep insertion order. Thread-safety: a Value is not
// synchronized; one render owns all values it creates (inputs are converted per render).
#ifndef GEMMA_ENGINE_CHAT_JINJA_VALUE_H_
#define GEMMA_ENGINE_CHAT_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace gemma::jinja {

// The Python exception class a template error corresponds to; jinja2's message is kept verbatim.
enum class ErrorKind { kSyntax, kUndefined, kType, kSecurity, kRaised, kRuntime };

// Thrown inside the interpreter only; ChatTemplate converts it to absl::Status at the module edge.
struct TemplateError {
  ErrorKind kind;
  std::string message;
  int line = 0;
};

[[noreturn]] void Fail(ErrorKind kind, std::string message);

class Value;
class Interpreter;
using ValueList = std::vector<Value>;

// Arguments of a call: positional then keyword, as Python passes them.
struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The keyword argument `name`, or positional[index] when index >= 0 and present, else nullptr.
  const Value* Get(std::string_view name, int index) const;
};
using NativeFn = std::function<Value(Interpreter&, CallArgs&)>;

// Insertion-ordered string-keyed map.
class Dict {
 public:
  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value value);
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kNamespace, kCallable };

class Value {
 public:
  Value() = default;  // Undefined with no hint.
  // An Undefined whose use raises `hint` as `error` (jinja2's hint; SecurityError for unsafe attributes).
  static Value Undefined(std::string hint, ErrorKind error = ErrorKind::kUndefined);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value String(std::string s);
  static Value List(ValueList items);
  static Value Tuple(ValueList items);
  static Value MakeDict(Dict dict = {});
  static Value Namespace(Dict dict);
  static Value Callable(std::string name, NativeFn fn);
  static Value FromJson(const nlohmann::ordered_json& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }

  bool bool_value() const { return bool_; }
  int64_t int_value() const { return kind_ == Kind::kBool ? (bool_ ? 1 : 0) : int_; }
  double AsDouble() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_value()); }
  const std::string& str() const { return str_; }
  const ValueList& list() const { return *list_; }
  const Dict& dict() const { return *dict_; }
  Dict& mutable_dict() const { return *dict_; }
  const NativeFn& fn() const { return *fn_; }
  // For Undefined: the message its use raises, and the exception class.
  const std::string& undefined_hint() const { return str_; }
  ErrorKind undefined_error() const { return undefined_error_; }
  // Raises this Undefined's error; REQUIRES: is_undefined().
  [[noreturn]] void FailUndefined() const;

  bool Truthy() const;
  std::string Str() const;       // Python str(); Undefined prints empty.
  std::string Repr() const;      // Python repr().
  std::string TypeName() const;  // Python's type(x).__name__.
  // Items iterated by `for`: list/tuple items, dict keys, string characters; Undefined iterates empty.
  ValueList Iterate() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  ErrorKind undefined_error_ = ErrorKind::kUndefined;
  std::string str_;  // string payload, Undefined hint, or callable name
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const NativeFn> fn_;
};

// Python's float repr (shortest round trip; exponent form outside [1e-4, 1e16)).
std::string FormatPyFloat(double value);
// Python's repr of a str.
std::string PyStrRepr(std::string_view s);
// Python equality (1 == 1.0 == True; Undefined equals Undefined).
bool PyEquals(const Value& a, const Value& b);
// Python's `<` for numbers, strings and sequences; TypeError otherwise.
bool PyLess(const Value& a, const Value& b);
// jinja2's object_type_repr: "dict object", "None", ...
std::string ObjectTypeRepr(const Value& v);

}  // namespace gemma::jinja

#endif  // GEMMA_ENGINE_CHAT_JINJA_VALUE_H_
