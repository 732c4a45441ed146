// Gemma 4 output parsing. Compared with vLLM (vllm/reasoning/gemma4_reasoning_parser.py,
// vllm/reasoning/basic_parsers.py, vllm/tool_parsers/gemma4_tool_parser.py):
// - Same markers and `thought\n` header stripping; an unterminated channel is
//   reasoning, as in vLLM's non-streaming extract_reasoning. vLLM's streaming
//   path drops a bare `thought` header cut short by `<channel|>`; here it stays
//   reasoning, as in its non-streaming path.
// - vLLM's reasoning parser runs first, so a call inside an unclosed channel
//   stays reasoning there; here `<|tool_call>` closes the channel (vLLM's
//   is_reasoning_end also treats <|tool_call> as the end of reasoning). A
//   second channel is reasoning again (the chat template strips every channel).
// - A call ends at the first `<tool_call|>`, like vLLM's regex `\}<tool_call\|>`;
//   a literal `<tool_call|>` inside a string value is therefore unsupported.
// - vLLM streams argument JSON diffs; here a call is emitted whole once closed.
// - vLLM's non-streaming content is the text before the first call, stripped,
//   and drops text after calls; its streaming path keeps all text verbatim.
//   Here all text outside calls is kept (one-shot equals streaming) except
//   whitespace right before a call and whitespace between the last call and
//   the end of output.
// - vLLM's argument parser is lenient (an unterminated string takes the rest);
//   here such calls are malformed and returned as content, never dropped.
#include "engine/chat/output_parser.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <utility>

namespace gemma {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kChannelOpen = "<|channel>";
constexpr std::string_view kChannelClose = "<channel|>";
constexpr std::string_view kCallOpen = "<|tool_call>";
constexpr std::string_view kCallClose = "<tool_call|>";
constexpr std::string_view kQuote = "<|\"|>";
constexpr std::string_view kThoughtHeader = "thought\n";
constexpr std::string_view kSpace = " \t\r\n";
constexpr size_t kLongestMarker = kCallOpen.size();
constexpr int kMaxDepth = 64;

bool IsSpace(char c) { return kSpace.find(c) != std::string_view::npos; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string_view StripTrailingSpace(std::string_view s) {
  const size_t last = s.find_last_not_of(kSpace);
  return last == std::string_view::npos ? std::string_view() : s.substr(0, last + 1);
}
std::string_view StripSpace(std::string_view s) {
  const size_t first = s.find_first_not_of(kSpace);
  return first == std::string_view::npos ? std::string_view() : StripTrailingSpace(s.substr(first));
}

bool IsValidUtf8(std::string_view s) {
  static constexpr uint32_t kMinCodePoint[] = {0, 0x80, 0x800, 0x10000};
  for (size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    int num_trail = 0;
    uint32_t cp = lead;
    if (lead >= 0x80) {
      if ((lead & 0xE0) == 0xC0) num_trail = 1, cp = lead & 0x1F;
      else if ((lead & 0xF0) == 0xE0) num_trail = 2, cp = lead & 0x0F;
      else if ((lead & 0xF8) == 0xF0) num_trail = 3, cp = lead & 0x07;
      else return false;
    }
    if (i + num_trail >= s.size()) return false;
    for (int k = 1; k <= num_trail; ++k) {
      const auto trail = static_cast<unsigned char>(s[i + k]);
      if ((trail & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (trail & 0x3F);
    }
    if (cp < kMinCodePoint[num_trail] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += num_trail + 1;
  }
  return true;
}

// JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
bool IsJsonNumber(std::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    const size_t start = i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    return i - start;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i < s.size() && s[i] == '0') {
    ++i;
  } else if (digits() == 0) {
    return false;
  }
  if (i < s.size() && s[i] == '.' && (++i, digits() == 0)) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

// Recursive-descent reader of Gemma's argument syntax.
class ArgumentReader {
 public:
  explicit ArgumentReader(std::string_view text) : text_(text) {}

  absl::StatusOr<Json> ReadWhole() {
    SkipSpace();
    if (!At('{')) return Error("arguments must be an object");
    absl::StatusOr<Json> object = ReadObject(0);
    if (!object.ok()) return object;
    SkipSpace();
    if (pos_ != text_.size()) return Error("text after the arguments object");
    return object;
  }

 private:
  absl::StatusOr<Json> ReadValue(int depth) {
    if (AtQuote()) {
      absl::StatusOr<std::string> s = ReadString();
      if (!s.ok()) return s.status();
      return Json(*std::move(s));
    }
    if (At('{')) return ReadObject(depth + 1);
    if (At('[')) return ReadArray(depth + 1);
    return ReadBare();
  }

  absl::StatusOr<Json> ReadObject(int depth) {
    if (depth >= kMaxDepth) return Error("nesting too deep");
    ++pos_;  // '{'
    Json object = Json::object();
    for (SkipSpace(); !Consume('}'); SkipSpace()) {
      absl::StatusOr<std::string> key = ReadKey();
      if (!key.ok()) return key.status();
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after a key");
      SkipSpace();
      absl::StatusOr<Json> value = ReadValue(depth);
      if (!value.ok()) return value;
      object[*key] = *std::move(value);
      SkipSpace();
      if (At('}')) continue;
      if (!Consume(',')) return Error("expected ',' or '}' in an object");
    }
    return object;
  }

  absl::StatusOr<Json> ReadArray(int depth) {
    if (depth >= kMaxDepth) return Error("nesting too deep");
    ++pos_;  // '['
    Json array = Json::array();
    for (SkipSpace(); !Consume(']'); SkipSpace()) {
      absl::StatusOr<Json> value = ReadValue(depth);
      if (!value.ok()) return value;
      array.push_back(*std::move(value));
      SkipSpace();
      if (At(']')) continue;
      if (!Consume(',')) return Error("expected ',' or ']' in an array");
    }
    return array;
  }

  // `<|"|>` raw text `<|"|>`; there is no escape sequence.
  absl::StatusOr<std::string> ReadString() {
    pos_ += kQuote.size();
    const size_t end = text_.find(kQuote, pos_);
    if (end == std::string_view::npos) return Error("unterminated string");
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + kQuote.size();
    return s;
  }

  absl::StatusOr<std::string> ReadKey() {
    if (AtQuote()) return ReadString();
    const size_t start = pos_;
    while (pos_ < text_.size() && std::string_view(":{}[],").find(text_[pos_]) ==
                                      std::string_view::npos && !AtQuote()) {
      ++pos_;
    }
    std::string_view key = StripTrailingSpace(text_.substr(start, pos_ - start));
    if (key.empty()) return Error("missing key");
    return std::string(key);
  }

  // Unquoted scalar: number, true, false, null (also none/nil) or a bare word.
  absl::StatusOr<Json> ReadBare() {
    const size_t start = pos_;
    while (pos_ < text_.size() && std::string_view(",}]").find(text_[pos_]) ==
                                      std::string_view::npos) {
      if (AtQuote() || At('{') || At('[')) return Error("unexpected token in a bare value");
      ++pos_;
    }
    std::string_view word = StripTrailingSpace(text_.substr(start, pos_ - start));
    if (word.empty()) return Error("missing value");
    if (word == "true") return Json(true);
    if (word == "false") return Json(false);
    std::string lower(word);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
    if (lower == "null" || lower == "none" || lower == "nil") return Json(nullptr);
    if (IsJsonNumber(word)) {
      Json number = Json::parse(word, nullptr, /*allow_exceptions=*/false);
      if (!number.is_discarded()) return number;
    }
    return Json(std::string(word));
  }

  bool At(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  bool AtQuote() const { return text_.substr(pos_).starts_with(kQuote); }
  bool Consume(char c) { return At(c) ? (++pos_, true) : false; }
  void SkipSpace() {
    while (pos_ < text_.size() && IsSpace(text_[pos_])) ++pos_;
  }
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError("gemma arguments: " + std::string(what) + " at byte " +
                                       std::to_string(pos_));
  }

  std::string_view text_;
  size_t pos_ = 0;
};

bool IsValidToolName(std::string_view name) {
  if (name.empty() || !IsValidUtf8(name)) return false;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (!(IsAlnum(c) || c == '_' || c == '-' || c == '.' || u >= 0x80)) return false;
  }
  return true;
}

struct ParsedCall {
  std::string name;
  Json arguments;
};

// The text between `<|tool_call>` and `<tool_call|>`: `call:NAME{ARGS}`.
std::optional<ParsedCall> ParseCallBody(std::string_view body) {
  body = StripSpace(body);
  if (!body.starts_with("call:")) return std::nullopt;
  body.remove_prefix(5);
  const size_t brace = body.find('{');
  if (brace == std::string_view::npos || !IsValidToolName(body.substr(0, brace))) {
    return std::nullopt;
  }
  absl::StatusOr<Json> arguments = ParseGemmaArguments(body.substr(brace));
  if (!arguments.ok()) return std::nullopt;
  return ParsedCall{std::string(body.substr(0, brace)), *std::move(arguments)};
}

// Where `buffer` (from `from` on) can be consumed: up to the first marker, or
// up to a trailing proper prefix of a marker, which must wait for more text.
struct Scan {
  size_t text_len = 0;     // bytes before the marker (or before the held suffix)
  std::string_view marker; // empty when none was found
};

Scan ScanFor(std::string_view buffer, std::initializer_list<std::string_view> markers,
             bool final, size_t from = 0) {
  Scan scan{buffer.size(), {}};
  for (std::string_view m : markers) {
    const size_t pos = buffer.find(m, from);
    if (pos != std::string_view::npos && pos < scan.text_len) scan = {pos, m};
  }
  if (!scan.marker.empty() || final) return scan;
  const size_t max_held = std::min(kLongestMarker - 1, buffer.size() - from);
  for (size_t held = max_held; held > 0; --held) {
    std::string_view suffix = buffer.substr(buffer.size() - held);
    for (std::string_view m : markers) {
      if (m.starts_with(suffix)) return {buffer.size() - held, {}};
    }
  }
  return scan;
}

void Append(ParsedDelta& into, ParsedDelta&& from) {
  into.reasoning += from.reasoning;
  into.content += from.content;
  for (ToolCall& call : from.tool_calls) into.tool_calls.push_back(std::move(call));
}

}  // namespace

absl::StatusOr<nlohmann::ordered_json> ParseGemmaArguments(std::string_view text) {
  if (!IsValidUtf8(text)) return absl::InvalidArgumentError("gemma arguments: invalid UTF-8");
  return ArgumentReader(text).ReadWhole();
}

OutputParser::OutputParser(OutputParserOptions options) : options_(std::move(options)) {
  if (options_.parse_reasoning && options_.thinking_expected) {
    mode_ = Mode::kReasoning;
    header_pending_ = true;
  }
  if (!options_.make_tool_call_id) {
    rng_state_ = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  }
  if (!options_.output_prefix.empty()) {
    buffer_ = options_.output_prefix;
    Process(/*final=*/false, primed_);
  }
}

ParsedDelta OutputParser::Push(std::string_view raw_text_delta) {
  ParsedDelta out = std::exchange(primed_, {});
  buffer_.append(raw_text_delta);
  Process(/*final=*/false, out);
  return out;
}

ParsedDelta OutputParser::Finish() {
  if (finished_) return {};
  ParsedDelta out = std::exchange(primed_, {});
  finished_ = true;
  Process(/*final=*/true, out);
  FlushThoughtHeader(out);
  if (!after_call_) out.content += pending_ws_;
  pending_ws_.clear();
  return out;
}

void OutputParser::Process(bool final, ParsedDelta& out) {
  for (bool progress = true; progress;) {
    switch (mode_) {
      case Mode::kContent: progress = StepContent(final, out); break;
      case Mode::kReasoning: progress = StepReasoning(final, out); break;
      case Mode::kToolCall: progress = StepToolCall(final, out); break;
    }
  }
}

bool OutputParser::StepContent(bool final, ParsedDelta& out) {
  const std::string_view channel = options_.parse_reasoning ? kChannelOpen : std::string_view();
  const std::string_view call = options_.parse_tool_calls ? kCallOpen : std::string_view();
  Scan scan = channel.empty() && call.empty() ? Scan{buffer_.size(), {}}
              : channel.empty()               ? ScanFor(buffer_, {call}, final)
              : call.empty()                  ? ScanFor(buffer_, {channel}, final)
                                              : ScanFor(buffer_, {channel, call}, final);
  EmitContent(std::string_view(buffer_).substr(0, scan.text_len), out);
  buffer_.erase(0, scan.text_len + scan.marker.size());
  if (scan.marker.empty()) return false;
  if (scan.marker == kCallOpen) {
    BeginToolCall();
  } else {
    mode_ = Mode::kReasoning;
    header_pending_ = true;
  }
  return true;
}

bool OutputParser::StepReasoning(bool final, ParsedDelta& out) {
  Scan scan = options_.parse_tool_calls
                  ? ScanFor(buffer_, {kChannelClose, kChannelOpen, kCallOpen}, final)
                  : ScanFor(buffer_, {kChannelClose, kChannelOpen}, final);
  EmitReasoning(std::string_view(buffer_).substr(0, scan.text_len), out);
  buffer_.erase(0, scan.text_len + scan.marker.size());
  if (scan.marker.empty()) return false;
  FlushThoughtHeader(out);
  if (scan.marker == kChannelClose) {
    mode_ = Mode::kContent;
  } else if (scan.marker == kChannelOpen) {
    header_pending_ = true;  // a redundant open: the header may follow again
  } else {
    BeginToolCall();
  }
  return true;
}

bool OutputParser::StepToolCall(bool final, ParsedDelta& out) {
  const Scan scan = ScanFor(buffer_, {kCallClose, kCallOpen}, /*final=*/true, call_scan_from_);
  if (scan.marker.empty()) {
    if (final) {
      AbandonToolCall(buffer_, /*closed=*/false, out);
      buffer_.clear();
      mode_ = Mode::kContent;
    } else {
      call_scan_from_ = buffer_.size() - std::min(buffer_.size(), kLongestMarker - 1);
    }
    return false;
  }
  const std::string body = buffer_.substr(0, scan.text_len);
  buffer_.erase(0, scan.text_len + scan.marker.size());
  mode_ = Mode::kContent;
  if (scan.marker == kCallClose) {
    EndToolCall(body, out);
  } else {
    AbandonToolCall(body, /*closed=*/false, out);
    BeginToolCall();
  }
  return true;
}

void OutputParser::EmitContent(std::string_view text, ParsedDelta& out) {
  if (!options_.parse_tool_calls) {
    out.content.append(text);
    return;
  }
  // Trailing whitespace waits: it is dropped if a call or, right after a
  // call, the end of output follows.
  const size_t last = text.find_last_not_of(kSpace);
  if (last == std::string_view::npos) {
    pending_ws_.append(text);
    return;
  }
  out.content += pending_ws_;
  out.content.append(text.substr(0, last + 1));
  pending_ws_.assign(text.substr(last + 1));
  after_call_ = false;
}

void OutputParser::EmitReasoning(std::string_view text, ParsedDelta& out) {
  if (!header_pending_) {
    out.reasoning.append(text);
    return;
  }
  header_seen_.append(text);
  if (header_seen_.starts_with(kThoughtHeader)) {
    out.reasoning.append(std::string_view(header_seen_).substr(kThoughtHeader.size()));
    header_seen_.clear();
    header_pending_ = false;
  } else if (!kThoughtHeader.starts_with(header_seen_)) {
    FlushThoughtHeader(out);
  }
}

void OutputParser::FlushThoughtHeader(ParsedDelta& out) {
  out.reasoning += header_seen_;
  header_seen_.clear();
  header_pending_ = false;
}

void OutputParser::BeginToolCall() {
  call_ws_ = std::move(pending_ws_);
  pending_ws_.clear();
  call_scan_from_ = 0;
  mode_ = Mode::kToolCall;
}

void OutputParser::EndToolCall(std::string_view body, ParsedDelta& out) {
  std::optional<ParsedCall> call = ParseCallBody(body);
  if (!call) {
    AbandonToolCall(body, /*closed=*/true, out);
    return;
  }
  call_ws_.clear();
  after_call_ = true;
  out.tool_calls.push_back(ToolCall{.id = NewToolCallId(),
                                    .index = num_tool_calls_++,
                                    .name = std::move(call->name),
                                    .arguments = std::move(call->arguments)});
}

void OutputParser::AbandonToolCall(std::string_view body, bool closed, ParsedDelta& out) {
  std::string raw = call_ws_;
  raw.append(kCallOpen).append(body).append(closed ? kCallClose : std::string_view());
  call_ws_.clear();
  EmitContent(raw, out);
}

std::string OutputParser::NewToolCallId() {
  if (options_.make_tool_call_id) return options_.make_tool_call_id();
  static constexpr std::string_view kAlphabet =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) {
    // splitmix64: a small, well-mixed generator that needs no global state.
    uint64_t z = (rng_state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    id += kAlphabet[(z ^ (z >> 31)) % kAlphabet.size()];
  }
  return id;
}

ParsedDelta ParseOutput(std::string_view raw_text, OutputParserOptions options) {
  OutputParser parser(std::move(options));
  ParsedDelta result = parser.Push(raw_text);
  Append(result, parser.Finish());
  return result;
}

}  // namespace gemma
