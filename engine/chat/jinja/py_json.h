// Python's json.dumps as transformers' `tojson` filter calls it (ensure_ascii=False by default).
#ifndef GEMMA_ENGINE_CHAT_JINJA_PY_JSON_H_
#define GEMMA_ENGINE_CHAT_JINJA_PY_JSON_H_

#include <optional>
#include <string>

#include "engine/chat/jinja/value.h"

namespace gemma::jinja {

struct JsonDumpOptions {
  std::optional<std::string> indent;  // per-level indent; nullopt = single line
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// Throws TemplateError (TypeError) for values JSON cannot represent (Undefined, callables).
std::string PyJsonDumps(const Value& value, const JsonDumpOptions& options);

}  // namespace gemma::jinja

#endif  // GEMMA_ENGINE_CHAT_JINJA_PY_JSON_H_
