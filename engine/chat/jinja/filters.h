// jinja2's built-in filters and tests (with transformers' `tojson` override).
#ifndef GEMMA_ENGINE_CHAT_JINJA_FILTERS_H_
#define GEMMA_ENGINE_CHAT_JINJA_FILTERS_H_

#include <string>

#include "engine/chat/jinja/ast.h"
#include "engine/chat/jinja/interpreter.h"
#include "engine/chat/jinja/value.h"

namespace gemma::jinja {

bool IsKnownFilter(const std::string& name);
bool IsKnownTest(const std::string& name);

// Throws TemplateError for unknown names and bad arguments.
Value ApplyFilter(Interpreter& interp, const std::string& name, const Value& input, CallArgs& args);
bool ApplyTest(Interpreter& interp, const std::string& name, const Value& input, CallArgs& args);

// Evaluates a kFilter node; a null innermost input expression takes `innermost` ({% filter %}).
Value ApplyFilterChain(Interpreter& interp, const Expr& filter, const Value& innermost, const ScopePtr& scope);

// Python's str.islower()/isupper().
bool PyIsLower(const std::string& s);
bool PyIsUpper(const std::string& s);

}  // namespace gemma::jinja

#endif  // GEMMA_ENGINE_CHAT_JINJA_FILTERS_H_
