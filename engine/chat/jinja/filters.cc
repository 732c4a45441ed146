// jinja2's built-in filters, with transformers' `tojson`.
#include "engine/chat/jinja/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "engine/chat/jinja/builtins.h"
#include "engine/chat/jinja/py_json.h"
#include "engine/chat/jinja/py_string.h"

namespace gemma::jinja {
namespace {

using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&);

const Value* Opt(const CallArgs& args, const char* name, int index) { return args.Get(name, index); }
bool OptBool(const CallArgs& args, const char* name, int index) {
  const Value* v = Opt(args, name, index);
  return v != nullptr && v->Truthy();
}

int64_t Length(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return 0;
    case Kind::kString: return static_cast<int64_t>(CodePointCount(v.str()));
    case Kind::kList:
    case Kind::kTuple: return static_cast<int64_t>(v.list().size());
    case Kind::kDict:
    case Kind::kNamespace: return static_cast<int64_t>(v.dict().size());
    default: Fail(ErrorKind::kType, "object of type '" + v.TypeName() + "' has no len()");
  }
}

// jinja2's make_attrgetter: dotted path, integer parts index sequences.
Value GetPath(const Value& item, const std::string& path) {
  Value v = item;
  for (std::string part : PySplit(path, std::string("."), -1)) {
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    v = GetItem(v, numeric ? Value::Int(std::stoll(part)) : Value::String(part));
  }
  return v;
}

// Sort key for case-insensitive comparisons.
Value Folded(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::String(PyLower(v.str())) : v;
}

Value Items(const Value& v) {
  if (v.is_undefined()) return Value::List({});
  if (!v.is_dict()) Fail(ErrorKind::kRuntime, "Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& [key, value] : v.dict().entries()) out.push_back(Value::Tuple({Value::String(key), value}));
  return Value::List(std::move(out));
}

Value DictSort(Interpreter&, const Value& v, CallArgs& args) {
  const bool case_sensitive = OptBool(args, "case_sensitive", 0);
  const Value* by = Opt(args, "by", 1);
  const int pos = by != nullptr && by->is_string() && by->str() == "value" ? 1 : 0;
  ValueList items = Items(v).list();
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return PyLess(Folded(a.list()[pos], case_sensitive), Folded(b.list()[pos], case_sensitive));
  });
  if (OptBool(args, "reverse", 2)) std::reverse(items.begin(), items.end());
  return Value::List(std::move(items));
}

Value Sort(Interpreter&, const Value& v, CallArgs& args) {
  const bool reverse = OptBool(args, "reverse", 0);
  const bool case_sensitive = OptBool(args, "case_sensitive", 1);
  const Value* attribute = Opt(args, "attribute", 2);
  ValueList items = v.Iterate();
  auto key = [&](const Value& x) {
    return Folded(attribute != nullptr && !attribute->is_none() ? GetPath(x, attribute->Str()) : x, case_sensitive);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? PyLess(key(b), key(a)) : PyLess(key(a), key(b));
  });
  return Value::List(std::move(items));
}

Value Map(Interpreter& interp, const Value& v, CallArgs& args) {
  ValueList out;
  const Value* attribute = Opt(args, "attribute", -1);
  if (attribute != nullptr) {
    const Value* fallback = Opt(args, "default", -1);
    for (const Value& item : v.Iterate()) {
      Value got = GetPath(item, attribute->Str());
      out.push_back(got.is_undefined() && fallback != nullptr ? *fallback : got);
    }
    return Value::List(std::move(out));
  }
  if (args.positional.empty()) Fail(ErrorKind::kRuntime, "map requires a filter argument");
  const std::string name = args.positional[0].Str();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : v.Iterate()) out.push_back(interp.CallFilter(name, item, rest));
  return Value::List(std::move(out));
}

Value SelectOrReject(Interpreter& interp, const Value& v, CallArgs& args, bool by_attribute, bool keep) {
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty()) Fail(ErrorKind::kType, "selectattr requires an attribute");
    attribute = args.positional[next++].Str();
  }
  std::string test;
  if (next < args.positional.size()) test = args.positional[next++].Str();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + std::min(next, args.positional.size()), args.positional.end());
  rest.keyword = args.keyword;
  ValueList out;
  for (const Value& item : v.Iterate()) {
    const Value subject = by_attribute ? GetPath(item, attribute) : item;
    const bool passed = test.empty() ? subject.Truthy() : interp.CallTest(test, subject, rest);
    if (passed == keep) out.push_back(item);
  }
  return Value::List(std::move(out));
}

Value Join(Interpreter&, const Value& v, CallArgs& args) {
  const Value* sep = Opt(args, "d", 0);
  const Value* attribute = Opt(args, "attribute", 1);
  std::string out;
  bool first = true;
  for (const Value& item : v.Iterate()) {
    if (!first) out += sep != nullptr ? sep->Str() : "";
    first = false;
    out += (attribute != nullptr && !attribute->is_none() ? GetPath(item, attribute->Str()) : item).Str();
  }
  return Value::String(std::move(out));
}

// transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value ToJson(Interpreter&, const Value& v, CallArgs& args) {
  JsonDumpOptions options;
  options.ensure_ascii = OptBool(args, "ensure_ascii", 0);
  const Value* indent = Opt(args, "indent", 1);
  if (indent != nullptr && !indent->is_none()) {
    options.indent = indent->is_string() ? indent->str() : std::string(std::max<int64_t>(0, indent->int_value()), ' ');
  }
  const Value* separators = Opt(args, "separators", 2);
  if (separators != nullptr && !separators->is_none()) Fail(ErrorKind::kType, "unsupported construct: tojson separators");
  options.sort_keys = OptBool(args, "sort_keys", 3);
  return Value::String(PyJsonDumps(v, options));
}

Value FirstOrLast(const Value& v, bool first) {
  ValueList items = v.Iterate();
  if (items.empty()) return Value::Undefined(first ? "No first item, sequence was empty." : "No last item, sequence was empty.");
  return first ? items.front() : items.back();
}

Value ToInt(Interpreter&, const Value& v, CallArgs& args) {
  const Value* fallback = Opt(args, "default", 0);
  if (v.kind() == Kind::kInt || v.kind() == Kind::kBool) return Value::Int(v.int_value());
  if (v.kind() == Kind::kFloat && std::isfinite(v.AsDouble())) return Value::Int(static_cast<int64_t>(v.AsDouble()));
  if (v.is_string()) {
    const std::string s = PyStrip(v.str(), std::nullopt, StripSide::kBoth);
    char* end = nullptr;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0') return Value::Int(i);
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0' && std::isfinite(d)) return Value::Int(static_cast<int64_t>(d));
  }
  return fallback != nullptr ? *fallback : Value::Int(0);
}

Value ToFloat(Interpreter&, const Value& v, CallArgs& args) {
  const Value* fallback = Opt(args, "default", 0);
  if (v.is_number()) return Value::Float(v.AsDouble());
  if (v.is_string()) {
    const std::string s = PyStrip(v.str(), std::nullopt, StripSide::kBoth);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value::Float(d);
  }
  return fallback != nullptr ? *fallback : Value::Float(0.0);
}

Value Round(Interpreter&, const Value& v, CallArgs& args) {
  const int64_t precision = Opt(args, "precision", 0) ? Opt(args, "precision", 0)->int_value() : 0;
  const Value* method = Opt(args, "method", 1);
  const std::string how = method != nullptr ? method->Str() : "common";
  if (!v.is_number()) Fail(ErrorKind::kType, "type " + v.TypeName() + " doesn't define __round__ method");
  if (how == "common" && v.kind() != Kind::kFloat) return Value::Int(v.int_value());
  const double scale = std::pow(10.0, static_cast<double>(precision));
  if (how == "floor") return Value::Float(std::floor(v.AsDouble() * scale) / scale);
  if (how == "ceil") return Value::Float(std::ceil(v.AsDouble() * scale) / scale);
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::clamp<int64_t>(precision, 0, 300)), v.AsDouble());
  return Value::Float(std::strtod(buf, nullptr));
}

Value Indent(Interpreter&, const Value& v, CallArgs& args) {
  const Value* width = Opt(args, "width", 0);
  const std::string pad = width == nullptr ? "    " : width->is_string() ? width->str() : std::string(width->int_value(), ' ');
  const bool first = OptBool(args, "first", 1);
  const bool blank = OptBool(args, "blank", 2);
  std::vector<std::string> lines = PySplit(v.Str() + "\n", std::string("\n"), -1);
  lines.pop_back();
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out.append("\n").append(blank || !lines[i].empty() ? pad : "");
    out += lines[i];
  }
  return Value::String(first ? pad + out : out);
}

Value Escape(Interpreter&, const Value& v, CallArgs&) {
  std::string out;
  for (char c : v.Str()) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value::String(std::move(out));
}

Value Unique(Interpreter&, const Value& v, CallArgs& args) {
  const bool case_sensitive = OptBool(args, "case_sensitive", 0);
  ValueList out;
  ValueList seen;
  for (const Value& item : v.Iterate()) {
    const Value key = Folded(item, case_sensitive);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return PyEquals(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::List(std::move(out));
}

Value Reverse(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::u32string u = DecodeUtf8(v.str());
    std::reverse(u.begin(), u.end());
    return Value::String(EncodeUtf8(u));
  }
  ValueList items = v.Iterate();
  std::reverse(items.begin(), items.end());
  return Value::List(std::move(items));
}

// jinja2's title filter: capitalize each word split on whitespace, '-', '(', '{', '[', '<'.
Value JinjaTitle(Interpreter&, const Value& v, CallArgs&) {
  std::u32string u = DecodeUtf8(v.Str());
  bool word_start = true;
  std::string out;
  for (char32_t c : u) {
    const bool separator = IsPySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    std::string one;
    AppendUtf8(c, one);
    out += separator ? one : word_start ? PyUpper(one) : PyLower(one);
    word_start = separator;
  }
  return Value::String(std::move(out));
}

Value Batch(Interpreter&, const Value& v, CallArgs& args) {
  const Value* count = Opt(args, "linecount", 0);
  if (count == nullptr || count->int_value() <= 0) Fail(ErrorKind::kType, "batch requires a positive linecount");
  const Value* fill = Opt(args, "fill_with", 1);
  ValueList out;
  ValueList current;
  for (const Value& item : v.Iterate()) {
    current.push_back(item);
    if (static_cast<int64_t>(current.size()) == count->int_value()) out.push_back(Value::List(std::move(current))), current.clear();
  }
  if (!current.empty()) {
    while (fill != nullptr && !fill->is_none() && static_cast<int64_t>(current.size()) < count->int_value()) current.push_back(*fill);
    out.push_back(Value::List(std::move(current)));
  }
  return Value::List(std::move(out));
}

Value WordCount(Interpreter&, const Value& v, CallArgs&) {
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : DecodeUtf8(v.Str())) {
    const bool word_char = c == '_' || (c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0 : !IsPySpace(c) && IsPyPrintable(c));
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::Int(words);
}

Value StrFilter(const Value& v, std::string (*f)(std::string_view)) { return Value::String(f(v.Str())); }

const std::unordered_map<std::string, FilterFn>& Filters() {
  static const auto* filters = new std::unordered_map<std::string, FilterFn>{
      {"trim", [](Interpreter&, const Value& v, CallArgs& a) {
         const Value* chars = Opt(a, "chars", 0);
         return Value::String(PyStrip(v.Str(), chars && !chars->is_none() ? std::optional<std::string>(chars->Str()) : std::nullopt, StripSide::kBoth));
       }},
      {"upper", [](Interpreter&, const Value& v, CallArgs&) { return StrFilter(v, PyUpper); }},
      {"lower", [](Interpreter&, const Value& v, CallArgs&) { return StrFilter(v, PyLower); }},
      {"capitalize", [](Interpreter&, const Value& v, CallArgs&) { return StrFilter(v, PyCapitalize); }},
      {"title", JinjaTitle},
      {"default", [](Interpreter&, const Value& v, CallArgs& a) {
         const Value* fallback = Opt(a, "default_value", 0);
         const bool use = v.is_undefined() || (OptBool(a, "boolean", 1) && !v.Truthy());
         return use ? (fallback ? *fallback : Value::String("")) : v;
       }},
      {"dictsort", DictSort},
      {"map", Map},
      {"select", [](Interpreter& i, const Value& v, CallArgs& a) { return SelectOrReject(i, v, a, false, true); }},
      {"reject", [](Interpreter& i, const Value& v, CallArgs& a) { return SelectOrReject(i, v, a, false, false); }},
      {"selectattr", [](Interpreter& i, const Value& v, CallArgs& a) { return SelectOrReject(i, v, a, true, true); }},
      {"rejectattr", [](Interpreter& i, const Value& v, CallArgs& a) { return SelectOrReject(i, v, a, true, false); }},
      {"list", [](Interpreter&, const Value& v, CallArgs&) { return Value::List(v.Iterate()); }},
      {"length", [](Interpreter&, const Value& v, CallArgs&) { return Value::Int(Length(v)); }},
      {"join", Join},
      {"tojson", ToJson},
      {"items", [](Interpreter&, const Value& v, CallArgs&) { return Items(v); }},
      {"first", [](Interpreter&, const Value& v, CallArgs&) { return FirstOrLast(v, true); }},
      {"last", [](Interpreter&, const Value& v, CallArgs&) { return FirstOrLast(v, false); }},
      {"replace", [](Interpreter&, const Value& v, CallArgs& a) {
         const Value* old_sub = Opt(a, "old", 0);
         const Value* new_sub = Opt(a, "new", 1);
         const Value* count = Opt(a, "count", 2);
         if (!old_sub || !new_sub) Fail(ErrorKind::kType, "replace requires old and new");
         return Value::String(PyReplace(v.Str(), old_sub->Str(), new_sub->Str(), count && !count->is_none() ? count->int_value() : -1));
       }},
      {"string", [](Interpreter&, const Value& v, CallArgs&) { return Value::String(v.Str()); }},
      {"int", ToInt},
      {"float", ToFloat},
      {"round", Round},
      {"abs", [](Interpreter&, const Value& v, CallArgs&) {
         if (v.kind() == Kind::kFloat) return Value::Float(std::fabs(v.AsDouble()));
         if (!v.is_number()) Fail(ErrorKind::kType, "bad operand type for abs(): '" + v.TypeName() + "'");
         return Value::Int(std::llabs(v.int_value()));
       }},
      {"unique", Unique},
      {"reverse", Reverse},
      {"sort", Sort},
      {"safe", [](Interpreter&, const Value& v, CallArgs&) { return Value::String(v.Str()); }},
      {"escape", Escape},
      {"indent", Indent},
      {"wordcount", WordCount},
      {"batch", Batch},
  };
  return *filters;
}

const std::unordered_map<std::string, std::string>& FilterAliases() {
  static const auto* aliases =
      new std::unordered_map<std::string, std::string>{{"d", "default"}, {"count", "length"}, {"e", "escape"}};
  return *aliases;
}

}  // namespace

bool IsKnownFilter(const std::string& name) { return Filters().count(name) > 0 || FilterAliases().count(name) > 0; }

Value ApplyFilter(Interpreter& interp, const std::string& name, const Value& input, CallArgs& args) {
  auto alias = FilterAliases().find(name);
  auto it = Filters().find(alias == FilterAliases().end() ? name : alias->second);
  if (it == Filters().end()) Fail(ErrorKind::kSyntax, "No filter named " + PyStrRepr(name) + ".");
  return it->second(interp, input, args);
}

}  // namespace gemma::jinja
