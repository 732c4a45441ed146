// Recursive-descent parser for the Jinja subset chat templates use, following jinja2's grammar
// and operator precedence (parser.py).
#ifndef GEMMA_ENGINE_CHAT_JINJA_PARSER_H_
#define GEMMA_ENGINE_CHAT_JINJA_PARSER_H_

#include <string_view>

#include "engine/chat/jinja/ast.h"

namespace gemma::jinja {

// Throws TemplateError (kSyntax, with line) on syntax errors and unsupported constructs such as
// {% include %}, {% extends %}, {% call %} or recursive loops; the message names the construct.
StmtList ParseTemplate(std::string_view source);

}  // namespace gemma::jinja

#endif  // GEMMA_ENGINE_CHAT_JINJA_PARSER_H_
