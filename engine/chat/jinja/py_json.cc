#include "engine/chat/jinja/py_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/chat/jinja/py_string.h"

namespace gemma::jinja {
namespace {

void AppendEscaped(std::string_view s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (char32_t c : DecodeUtf8(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        char buf[16];
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
          if (c >= 0x10000) {
            const char32_t v = c - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          }
          out += buf;
        } else {
          AppendUtf8(c, out);
        }
      }
    }
  }
  out += '"';
}

std::string FloatJson(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return FormatPyFloat(f);
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& options) : options_(options) {}

  void Dump(const Value& v, int depth, std::string& out) {
    switch (v.kind()) {
      case Kind::kNone: out += "null"; return;
      case Kind::kBool: out += v.bool_value() ? "true" : "false"; return;
      case Kind::kInt: out += std::to_string(v.int_value()); return;
      case Kind::kFloat: out += FloatJson(v.AsDouble()); return;
      case Kind::kString: AppendEscaped(v.str(), options_.ensure_ascii, out); return;
      case Kind::kList:
      case Kind::kTuple: return DumpList(v.list(), depth, out);
      case Kind::kDict: return DumpDict(v.dict(), depth, out);
      default:
        Fail(ErrorKind::kType, "Object of type " + v.TypeName() + " is not JSON serializable");
    }
  }

 private:
  void Newline(int depth, std::string& out) const {
    out += '\n';
    for (int i = 0; i < depth; ++i) out += *options_.indent;
  }
  const char* ItemSeparator() const { return options_.indent ? "," : ", "; }

  void DumpList(const ValueList& items, int depth, std::string& out) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += ItemSeparator();
      if (options_.indent) Newline(depth + 1, out);
      Dump(items[i], depth + 1, out);
    }
    if (options_.indent) Newline(depth, out);
    out += ']';
  }

  void DumpDict(const Dict& dict, int depth, std::string& out) {
    if (dict.size() == 0) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& entry : dict.entries()) entries.push_back(&entry);
    if (options_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
    }
    out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out += ItemSeparator();
      if (options_.indent) Newline(depth + 1, out);
      AppendEscaped(entries[i]->first, options_.ensure_ascii, out);
      out += ": ";
      Dump(entries[i]->second, depth + 1, out);
    }
    if (options_.indent) Newline(depth, out);
    out += '}';
  }

  const JsonDumpOptions& options_;
};

}  // namespace

std::string PyJsonDumps(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  Dumper(options).Dump(value, 0, out);
  return out;
}

}  // namespace gemma::jinja
