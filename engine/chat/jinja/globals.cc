// The global functions transformers' chat-template environment provides.
#include <ctime>

#include "engine/chat/jinja/builtins.h"

namespace gemma::jinja {
namespace {

Value Range(Interpreter&, CallArgs& args) {
  const ValueList& p = args.positional;
  if (p.empty() || p.size() > 3) Fail(ErrorKind::kType, std::string("range expected at most 3 arguments, got ").append(std::to_string(p.size())));
  for (const Value& v : p) {
    if (v.kind() != Kind::kInt && v.kind() != Kind::kBool) {
      Fail(ErrorKind::kType, "'" + v.TypeName() + "' object cannot be interpreted as an integer");
    }
  }
  const int64_t start = p.size() == 1 ? 0 : p[0].int_value();
  const int64_t stop = p.size() == 1 ? p[0].int_value() : p[1].int_value();
  const int64_t step = p.size() == 3 ? p[2].int_value() : 1;
  if (step == 0) Fail(ErrorKind::kRuntime, "range() arg 3 must not be zero");
  ValueList out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::Int(i));
  return Value::List(std::move(out));
}

Dict DictFromArgs(const CallArgs& args) {
  Dict dict;
  for (const Value& v : args.positional) {
    if (!v.is_dict() && v.kind() != Kind::kNamespace) Fail(ErrorKind::kType, "dict() positional argument must be a mapping");
    for (const auto& [key, value] : v.dict().entries()) dict.Set(key, value);
  }
  for (const auto& [key, value] : args.keyword) dict.Set(key, value);
  return dict;
}

Value StrftimeNow(Interpreter&, CallArgs& args) {
  const Value* format = args.Get("format", 0);
  if (format == nullptr || !format->is_string()) Fail(ErrorKind::kType, "strftime_now() takes a format string");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[512];
  const size_t n = std::strftime(buf, sizeof(buf), format->str().c_str(), &local);
  return Value::String(std::string(buf, n));
}

}  // namespace

Dict MakeGlobals() {
  Dict globals;
  globals.Set("range", Value::Callable("range", Range));
  globals.Set("namespace", Value::Callable("namespace", [](Interpreter&, CallArgs& args) {
                return Value::Namespace(DictFromArgs(args));
              }));
  globals.Set("dict", Value::Callable("dict", [](Interpreter&, CallArgs& args) {
                return Value::MakeDict(DictFromArgs(args));
              }));
  globals.Set("raise_exception", Value::Callable("raise_exception", [](Interpreter&, CallArgs& args) -> Value {
                const Value* message = args.Get("message", 0);
                Fail(ErrorKind::kRaised, message == nullptr ? "" : message->Str());
              }));
  globals.Set("strftime_now", Value::Callable("strftime_now", StrftimeNow));
  return globals;
}

}  // namespace gemma::jinja
