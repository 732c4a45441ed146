#include "engine/chat/jinja/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "engine/chat/jinja/py_string.h"

namespace gemma::jinja {

void Fail(ErrorKind kind, std::string message) { throw TemplateError{kind, std::move(message), 0}; }

const Value* CallArgs::Get(std::string_view name, int index) const {
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  if (index >= 0 && static_cast<size_t>(index) < positional.size()) return &positional[index];
  return nullptr;
}

const Value* Dict::Find(std::string_view key) const {
  for (const auto& entry : entries_) {
    if (entry.first == key) return &entry.second;
  }
  return nullptr;
}

void Dict::Set(std::string key, Value value) {
  for (auto& entry : entries_) {
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

Value Value::Undefined(std::string hint, ErrorKind error) {
  Value v;
  v.str_ = std::move(hint);
  v.undefined_error_ = error;
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}

Value Value::Float(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = f;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.str_ = std::move(s);
  return v;
}

Value Value::List(ValueList items) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}

Value Value::Tuple(ValueList items) {
  Value v = List(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}

Value Value::MakeDict(Dict dict) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<Dict>(std::move(dict));
  return v;
}

Value Value::Namespace(Dict dict) {
  Value v = MakeDict(std::move(dict));
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::Callable(std::string name, NativeFn fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.str_ = std::move(name);
  v.fn_ = std::make_shared<const NativeFn>(std::move(fn));
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return None();
    case nlohmann::ordered_json::value_t::boolean: return Bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Int(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return Int(static_cast<int64_t>(json.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Float(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return String(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(FromJson(item));
      return List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict dict;
      for (const auto& [key, item] : json.items()) dict.Set(key, FromJson(item));
      return MakeDict(std::move(dict));
    }
    default: return Undefined("unsupported JSON value");
  }
}

void Value::FailUndefined() const { Fail(undefined_error_, str_); }

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return bool_;
    case Kind::kInt: return int_ != 0;
    case Kind::kFloat: return float_ != 0.0;
    case Kind::kString: return !str_.empty();
    case Kind::kList:
    case Kind::kTuple: return !list_->empty();
    case Kind::kDict: return dict_->size() != 0;
    default: return true;
  }
}

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: return str_;
    default: return Repr();
  }
}

namespace {

std::string JoinRepr(const ValueList& items, const char* open, const char* close, bool one_tuple) {
  std::string out = open;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += items[i].Repr();
  }
  if (one_tuple && items.size() == 1) out += ",";
  return out + close;
}

std::string DictRepr(const Dict& dict) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : dict.entries()) {
    if (!first) out += ", ";
    first = false;
    out += PyStrRepr(key) + ": " + value.Repr();
  }
  return out + "}";
}

}  // namespace

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return bool_ ? "True" : "False";
    case Kind::kInt: return std::to_string(int_);
    case Kind::kFloat: return FormatPyFloat(float_);
    case Kind::kString: return PyStrRepr(str_);
    case Kind::kList: return JoinRepr(*list_, "[", "]", false);
    case Kind::kTuple: return JoinRepr(*list_, "(", ")", true);
    case Kind::kDict: return DictRepr(*dict_);
    case Kind::kNamespace: return "<Namespace " + DictRepr(*dict_) + ">";
    case Kind::kCallable: return "<function " + str_ + ">";
  }
  return "";
}

std::string Value::TypeName() const {
  static const char* const kNames[] = {"Undefined", "NoneType", "bool", "int", "float", "str",
                                       "list", "tuple", "dict", "Namespace", "function"};
  return kNames[static_cast<int>(kind_)];
}

ValueList Value::Iterate() const {
  switch (kind_) {
    case Kind::kUndefined: return {};
    case Kind::kList:
    case Kind::kTuple: return *list_;
    case Kind::kDict: {
      ValueList keys;
      for (const auto& entry : dict_->entries()) keys.push_back(String(entry.first));
      return keys;
    }
    case Kind::kString: {
      ValueList chars;
      for (char32_t c : DecodeUtf8(str_)) {
        std::string s;
        AppendUtf8(c, s);
        chars.push_back(String(std::move(s)));
      }
      return chars;
    }
    default: Fail(ErrorKind::kType, "'" + TypeName() + "' object is not iterable");
  }
}

std::string FormatPyFloat(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e_pos = sci.find('e');
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  std::string mantissa = sci.substr(0, e_pos);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out.append("0.").append(-exponent - 1, '0').append(digits);
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out += digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

std::string PyStrRepr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : DecodeUtf8(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (IsPyPrintable(c)) {
      AppendUtf8(c, out);
    } else {
      char buf[16];
      const char* format = c < 0x100 ? "\\x%02x" : c < 0x10000 ? "\\u%04x" : "\\U%08x";
      std::snprintf(buf, sizeof(buf), format, static_cast<unsigned>(c));
      out += buf;
    }
  }
  out += quote;
  return out;
}

bool PyEquals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return a.AsDouble() == b.AsDouble();
    return a.int_value() == b.int_value();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.str() == b.str();
    case Kind::kList:
    case Kind::kTuple: {
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i) {
        if (!PyEquals(a.list()[i], b.list()[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [key, value] : a.dict().entries()) {
        const Value* other = b.dict().Find(key);
        if (other == nullptr || !PyEquals(value, *other)) return false;
      }
      return true;
    }
    default: return &a.dict() == &b.dict();
  }
}

bool PyLess(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return a.AsDouble() < b.AsDouble();
    return a.int_value() < b.int_value();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.kind() == b.kind() && a.is_sequence()) {
    const ValueList& x = a.list();
    const ValueList& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!PyEquals(x[i], y[i])) return PyLess(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined()) a.FailUndefined();
  if (b.is_undefined()) b.FailUndefined();
  Fail(ErrorKind::kType, "'<' not supported between instances of '" + a.TypeName() + "' and '" + b.TypeName() + "'");
}

std::string ObjectTypeRepr(const Value& v) {
  if (v.is_none()) return "None";
  return v.TypeName() + " object";
}

}  // namespace gemma::jinja
