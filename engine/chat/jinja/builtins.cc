#include "engine/chat/jinja/builtins.h"

#include <cmath>
#include <ctime>
#include <initializer_list>

#include "engine/chat/jinja/interpreter.h"
#include "engine/chat/jinja/py_string.h"

namespace gemma::jinja {
namespace {

bool OneOf(std::string_view name, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names) {
    if (n == name) return true;
  }
  return false;
}

// The Undefined jinja2's ImmutableSandboxedEnvironment returns for methods that mutate.
Value Unsafe(const Value& obj, const std::string& name) {
  return Value::Undefined("access to attribute " + PyStrRepr(name) + " of " + PyStrRepr(obj.TypeName()) +
                              " object is unsafe.",
                          ErrorKind::kSecurity);
}

std::optional<std::string> OptionalString(const CallArgs& args, std::string_view name, int index) {
  const Value* v = args.Get(name, index);
  if (v == nullptr || v->is_none()) return std::nullopt;
  if (!v->is_string()) Fail(ErrorKind::kType, "must be str or None, not " + v->TypeName());
  return v->str();
}

int64_t OptionalInt(const CallArgs& args, std::string_view name, int index, int64_t fallback) {
  const Value* v = args.Get(name, index);
  return v == nullptr ? fallback : v->int_value();
}

bool MatchesAffix(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) Fail(ErrorKind::kType, "startswith first arg must be str or a tuple of str");
    const std::string& a = v.str();
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_sequence()) {
    for (const Value& v : affix.list()) {
      if (one(v)) return true;
    }
    return false;
  }
  return one(affix);
}

Value StringMethodResult(const std::string& s, const std::string& name, CallArgs& args) {
  if (name == "split") {
    ValueList parts;
    for (std::string& p : PySplit(s, OptionalString(args, "sep", 0), OptionalInt(args, "maxsplit", 1, -1))) {
      parts.push_back(Value::String(std::move(p)));
    }
    return Value::List(std::move(parts));
  }
  if (name == "strip") return Value::String(PyStrip(s, OptionalString(args, "chars", 0), StripSide::kBoth));
  if (name == "lstrip") return Value::String(PyStrip(s, OptionalString(args, "chars", 0), StripSide::kLeft));
  if (name == "rstrip") return Value::String(PyStrip(s, OptionalString(args, "chars", 0), StripSide::kRight));
  if (name == "upper") return Value::String(PyUpper(s));
  if (name == "lower") return Value::String(PyLower(s));
  if (name == "title") return Value::String(PyTitle(s));
  if (name == "capitalize") return Value::String(PyCapitalize(s));
  const Value* first = args.Get("", 0);
  if (first == nullptr) Fail(ErrorKind::kType, name + "() takes at least 1 argument (0 given)");
  if (name == "startswith" || name == "endswith") return Value::Bool(MatchesAffix(s, *first, name == "startswith"));
  if (name == "replace") {
    const Value* replacement = args.Get("", 1);
    if (!first->is_string() || replacement == nullptr || !replacement->is_string()) {
      Fail(ErrorKind::kType, "replace() arguments must be str");
    }
    return Value::String(PyReplace(s, first->str(), replacement->str(), OptionalInt(args, "count", 2, -1)));
  }
  if (name == "find" || name == "count") {
    if (!first->is_string()) Fail(ErrorKind::kType, "must be str, not " + first->TypeName());
    if (name == "find") {
      const size_t at = s.find(first->str());
      return Value::Int(at == std::string::npos ? -1 : static_cast<int64_t>(CodePointCount(s.substr(0, at))));
    }
    return Value::Int(static_cast<int64_t>(PySplit(s, first->str(), -1).size()) - 1);
  }
  std::string joined;
  const ValueList items = first->Iterate();
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) Fail(ErrorKind::kType, "sequence item " + std::to_string(i) + ": expected str instance, " + items[i].TypeName() + " found");
    if (i > 0) joined += s;
    joined += items[i].str();
  }
  return Value::String(std::move(joined));
}

Value DictMethodResult(const Value& obj, const std::string& name, CallArgs& args) {
  ValueList out;
  for (const auto& [key, value] : obj.dict().entries()) {
    if (name == "items") out.push_back(Value::Tuple({Value::String(key), value}));
    else if (name == "keys") out.push_back(Value::String(key));
    else if (name == "values") out.push_back(value);
  }
  if (name != "get") return Value::List(std::move(out));
  const Value* key = args.Get("", 0);
  if (key == nullptr) Fail(ErrorKind::kType, "get expected at least 1 argument, got 0");
  const Value* found = key->is_string() ? obj.dict().Find(key->str()) : nullptr;
  if (found != nullptr) return *found;
  const Value* fallback = args.Get("", 1);
  return fallback != nullptr ? *fallback : Value::None();
}

Value BoundMethod(const Value& obj, const std::string& name) {
  return Value::Callable(name, [obj, name](Interpreter&, CallArgs& args) {
    if (obj.is_string()) return StringMethodResult(obj.str(), name, args);
    return DictMethodResult(obj, name, args);
  });
}

Value MissingAttribute(const Value& obj, const std::string& name) {
  return Value::Undefined(PyStrRepr(ObjectTypeRepr(obj)) + " has no attribute " + PyStrRepr(name));
}

}  // namespace

Value GetAttribute(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::kDict: {
      if (OneOf(name, {"items", "keys", "values", "get"})) return BoundMethod(obj, name);
      if (OneOf(name, {"pop", "popitem", "setdefault", "update", "clear"})) return Unsafe(obj, name);
      const Value* found = obj.dict().Find(name);
      return found != nullptr ? *found : MissingAttribute(obj, name);
    }
    case Kind::kNamespace: {
      const Value* found = obj.dict().Find(name);
      return found != nullptr ? *found
                              : Value::Undefined("'jinja2.utils.Namespace object' has no attribute " + PyStrRepr(name));
    }
    case Kind::kString:
      if (OneOf(name, {"split", "strip", "lstrip", "rstrip", "startswith", "endswith", "upper", "lower", "replace",
                       "title", "capitalize", "find", "count", "join"})) {
        return BoundMethod(obj, name);
      }
      return MissingAttribute(obj, name);
    case Kind::kList:
      if (OneOf(name, {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"})) {
        return Unsafe(obj, name);
      }
      return MissingAttribute(obj, name);
    default: return MissingAttribute(obj, name);
  }
}

Value GetItem(const Value& obj, const Value& key) {
  if (key.kind() == Kind::kInt || key.kind() == Kind::kBool) {
    int64_t index = key.int_value();
    if (obj.is_sequence() || obj.is_string()) {
      const std::u32string chars = obj.is_string() ? DecodeUtf8(obj.str()) : std::u32string();
      const int64_t length = obj.is_string() ? chars.size() : obj.list().size();
      if (index < 0) index += length;
      if (index >= 0 && index < length) {
        if (obj.is_sequence()) return obj.list()[index];
        std::string one;
        AppendUtf8(chars[index], one);
        return Value::String(std::move(one));
      }
    }
    return Value::Undefined(ObjectTypeRepr(obj) + " has no element " + key.Repr());
  }
  if (key.is_string()) {
    if (obj.is_dict()) {
      const Value* found = obj.dict().Find(key.str());
      if (found != nullptr) return *found;
    }
    return GetAttribute(obj, key.str());
  }
  return Value::Undefined(ObjectTypeRepr(obj) + " has no element " + key.Repr());
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined: return false;
    case Kind::kString:
      if (!item.is_string()) {
        Fail(ErrorKind::kType, "'in <string>' requires string as left operand, not " + item.TypeName());
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
    case Kind::kTuple:
      for (const Value& v : container.list()) {
        if (PyEquals(v, item)) return true;
      }
      return false;
    case Kind::kDict: return item.is_string() && container.dict().Find(item.str()) != nullptr;
    default: Fail(ErrorKind::kType, "argument of type '" + container.TypeName() + "' is not iterable");
  }
}

}  // namespace gemma::jinja
