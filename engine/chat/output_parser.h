// Splits Gemma 4 model output into reasoning, content and tool calls, the way
// vLLM's `gemma4` reasoning parser and `gemma4` tool parser do, while the text
// streams in.
//
// The parser works on detokenized text in which special tokens are rendered
// as their text (`<|channel>`, `<channel|>`, `<|tool_call>`, `<tool_call|>`,
// `<|"|>`); it knows no token ids and does not depend on the tokenizer.
// Markers may arrive split across any chunk boundary: an incomplete marker,
// an incomplete thought-channel header and an incomplete tool call are held
// back until they resolve or until Finish().
//
// Output grammar it understands:
//   <|channel>thought\n REASONING <channel|>      thought channel
//   <|tool_call>call:NAME{ARGS}<tool_call|>       one tool call (several may follow)
// ARGS is Gemma's argument syntax, see ParseGemmaArguments().
//
// Special tokens skipped from the text (skip_special_tokens=true) cannot be
// recovered: without `<|channel>`/`<channel|>` the reasoning reaches content
// (beginning with the literal `thought\n`), and without `<|tool_call>` and
// `<|"|>` a call is plain `call:NAME{...}` text whose string boundaries are
// lost, so it stays content. Like vLLM, callers must detokenize with special
// tokens kept. Stop tokens (`<turn|>`, `<eos>`, `<|tool_response>`) should not
// be fed; if they are, they are ordinary content.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gemma {

struct ToolCall {
  std::string id;     // "call_" + suffix, see OutputParserOptions::make_tool_call_id
  int index = 0;      // position among this sequence's tool calls (OpenAI stream index)
  std::string name;
  nlohmann::ordered_json arguments;  // always a JSON object, keys in model order
};

struct ParsedDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;

  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

struct OutputParserOptions {
  // Route the thought channel to `reasoning`. When false, channel markers are
  // ordinary content.
  bool parse_reasoning = true;
  // Turn `<|tool_call>…<tool_call|>` into ToolCalls. When false, call markup is
  // ordinary content (or reasoning, inside the thought channel).
  bool parse_tool_calls = true;
  // The prompt already opened the thought channel, so generation starts in
  // reasoning (a leading `<|channel>thought\n` is still accepted). With the
  // official template this stays false: `enable_thinking` makes the model
  // open the channel itself. Output that never closes the channel is then all
  // reasoning. Ignored without parse_reasoning.
  bool thinking_expected = false;
  // Raw text that the prompt ended with but that belongs to the answer (a
  // forced tool call's opening, `<|tool_call>call:NAME{`): parsed as the
  // beginning of the output, as if it had been generated. Whatever it yields
  // at once comes with the first Push() or Finish().
  std::string output_prefix;
  // Returns a fresh tool-call id. Empty: "call_" + 24 random alphanumerics
  // (vLLM uses "chatcmpl-tool-" + a random hex uuid).
  std::function<std::string()> make_tool_call_id;
};

// One per sequence. Thread-safety: none; use from one thread at a time.
//
// Semantics (the header comment of output_parser.cc compares them with vLLM):
// - Thought channel text goes to `reasoning`, without the `thought\n` header.
//   An unterminated channel is reasoning to the end. `<|tool_call>` inside the
//   channel closes it. The channel may open again later.
// - A well-formed call becomes a ToolCall. Whitespace right before a call and
//   whitespace between the last call and the end of output are dropped; all
//   other content passes through byte for byte (text after a call keeps the
//   whitespace that separates it from the call).
// - A malformed call (bad name or arguments, or a new `<|tool_call>` before
//   `<tool_call|>`) and a call still open at Finish() are returned as content,
//   markers included, never dropped.
// - Feeding any chunking of a text yields the same concatenated result as
//   ParseOutput() of the whole text.
class OutputParser {
 public:
  explicit OutputParser(OutputParserOptions options = {});

  // Adds raw generated text; returns what can be emitted now.
  // REQUIRES: Finish() has not been called.
  ParsedDelta Push(std::string_view raw_text_delta);
  // End of generation: releases everything held back.
  ParsedDelta Finish();

  // True once a well-formed tool call was emitted (finish_reason "tool_calls").
  bool saw_tool_calls() const { return num_tool_calls_ > 0; }

 private:
  enum class Mode { kContent, kReasoning, kToolCall };

  void Process(bool final, ParsedDelta& out);
  // Each consumes from buffer_; returns false when it needs more text.
  bool StepContent(bool final, ParsedDelta& out);
  bool StepReasoning(bool final, ParsedDelta& out);
  bool StepToolCall(bool final, ParsedDelta& out);

  void EmitContent(std::string_view text, ParsedDelta& out);
  void EmitReasoning(std::string_view text, ParsedDelta& out);
  void FlushThoughtHeader(ParsedDelta& out);
  void BeginToolCall();
  void EndToolCall(std::string_view body, ParsedDelta& out);
  void AbandonToolCall(std::string_view body, bool closed, ParsedDelta& out);
  std::string NewToolCallId();

  OutputParserOptions options_;
  Mode mode_ = Mode::kContent;
  std::string buffer_;          // raw text not yet consumed
  size_t call_scan_from_ = 0;   // kToolCall: buffer_ offset already searched for markers
  bool header_pending_ = false; // kReasoning: `thought\n` may still follow `<|channel>`
  std::string header_seen_;     // reasoning text held while header_pending_
  std::string pending_ws_;      // trailing content whitespace: dropped if a call follows
  std::string call_ws_;         // pending_ws_ that preceded the open call
  bool after_call_ = false;     // no content since the last call: trailing whitespace is dropped
  int num_tool_calls_ = 0;
  uint64_t rng_state_ = 0;      // default tool-call ids
  bool finished_ = false;
  ParsedDelta primed_;          // what output_prefix yielded, not yet returned
};

// Parses a whole output at once; same result as Push(raw_text) + Finish().
ParsedDelta ParseOutput(std::string_view raw_text, OutputParserOptions options = {});

// Gemma argument syntax to JSON: an object `{…}` with bare or `<|"|>`-quoted
// keys; values are `<|"|>`-quoted strings (raw, no escapes), numbers, true,
// false, null, objects and arrays. Like vLLM, `none`/`nil` (any case) are null
// and another bare word is a string. Whitespace between tokens is allowed.
//   `{location:<|"|>Paris<|"|>,days:3}` -> {"location":"Paris","days":3}
// Errors (InvalidArgument): unterminated string/object/array, missing ':' or
// value, text after the object, invalid UTF-8, nesting deeper than 64.
absl::StatusOr<nlohmann::ordered_json> ParseGemmaArguments(std::string_view text);

}  // namespace gemma
