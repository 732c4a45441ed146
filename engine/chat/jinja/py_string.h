// Python `str` semantics over UTF-8 std::string: code-point indexing, Unicode whitespace as
// str.isspace() defines it, and the str methods chat templates call.
#ifndef GEMMA_ENGINE_CHAT_JINJA_PY_STRING_H_
#define GEMMA_ENGINE_CHAT_JINJA_PY_STRING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gemma::jinja {

// Invalid UTF-8 bytes decode to themselves (as if Latin-1), so round trips never lose data.
std::u32string DecodeUtf8(std::string_view s);
std::string EncodeUtf8(std::u32string_view s);
void AppendUtf8(char32_t c, std::string& out);
size_t CodePointCount(std::string_view s);

bool IsPySpace(char32_t c);
bool IsPyPrintable(char32_t c);

enum class StripSide { kBoth, kLeft, kRight };
// str.strip(chars); nullopt chars strips Unicode whitespace.
std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, StripSide side);
// str.split(sep, maxsplit); nullopt sep splits on whitespace runs.
std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::string PyReplace(std::string_view s, std::string_view old_sub, std::string_view new_sub, int64_t count);
// Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (simple one-to-one mappings).
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyTitle(std::string_view s);
std::string PyCapitalize(std::string_view s);

}  // namespace gemma::jinja

#endif  // GEMMA_ENGINE_CHAT_JINJA_PY_STRING_H_
