// Attribute and item access with jinja2's fallbacks, Python's str/dict/list methods, the
// operators' Python semantics and the global functions transformers exposes to chat templates.
#ifndef GEMMA_ENGINE_CHAT_JINJA_BUILTINS_H_
#define GEMMA_ENGINE_CHAT_JINJA_BUILTINS_H_

#include <string>
#include <string_view>

#include "engine/chat/jinja/value.h"

namespace gemma::jinja {

// `obj.name`: the attribute (a bound method for str/dict), else the item, else Undefined.
Value GetAttribute(const Value& obj, const std::string& name);
// `obj[key]`: the item, else (for a str key) the attribute, else Undefined.
Value GetItem(const Value& obj, const Value& key);
// Python's binary operators + - * / // % ** on values.
Value Arithmetic(const std::string& op, const Value& a, const Value& b);
// Python's `item in container`.
bool Contains(const Value& container, const Value& item);
// Globals: range, namespace, dict, raise_exception, strftime_now.
Dict MakeGlobals();

}  // namespace gemma::jinja

#endif  // GEMMA_ENGINE_CHAT_JINJA_BUILTINS_H_
