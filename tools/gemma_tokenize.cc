// gemma-tokenize: how a prompt becomes ids, for debugging prompts (like
// llama-tokenize). Reads JSON Lines on stdin:
//   "text"                      -> ids without BOS (encode(text, add_special_tokens=False))
//   {"messages": [...], ...}    -> a chat in apply_chat_template's shape (messages, tools,
//                                  add_generation_prompt, enable_thinking, any other
//                                  template variable), rendered and encoded exactly as
//                                  Generate does (add_generation_prompt defaults to true,
//                                  as in Generate)
// and prints one JSON array of ids per line; --render prints the rendered chat
// text as a JSON string instead; --decode reads JSON arrays of ids and prints
// JSON strings. Bad input: a message naming the line, exit 1.
#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "CLI/CLI.hpp"
#include "engine/chat/chat_prompt.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

using Json = nlohmann::ordered_json;

struct Flags {
  std::string model;
  std::string tokenizer;
  std::string chat_template;
  bool render = false;
  bool decode = false;
  bool skip_special_tokens = false;
};

int Fail(const std::string& message) {
  std::cerr << "gemma-tokenize: " << message << "\n";
  return 1;
}

// apply_chat_template's keyword arguments: the known ones, the rest are
// template variables.
absl::StatusOr<gemma::ChatInput> ToChatInput(const Json& object) {
  gemma::ChatInput chat;
  for (const auto& [key, value] : object.items()) {
    if (key == "messages") {
      if (!value.is_array()) return absl::InvalidArgumentError("\"messages\" must be an array");
      chat.messages = value;
    } else if (key == "tools") {
      chat.tools = value;
    } else if (key == "add_generation_prompt") {
      if (!value.is_boolean()) {
        return absl::InvalidArgumentError("\"add_generation_prompt\" must be true or false");
      }
      chat.add_generation_prompt = value.get<bool>();
    } else {
      chat.template_kwargs[key] = value;
    }
  }
  if (!object.contains("messages")) return absl::InvalidArgumentError("\"messages\" is missing");
  return chat;
}

absl::StatusOr<std::string> ProcessLine(const Json& input, const Flags& f,
                                        const gemma::Tokenizer& tokenizer,
                                        const gemma::ChatTemplate& chat_template) {
  if (f.decode) {
    if (!input.is_array()) return absl::InvalidArgumentError("expected a JSON array of ids");
    std::vector<int32_t> ids;
    for (const Json& id : input) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() >= tokenizer.vocab_size()) {
        return absl::InvalidArgumentError("ids must be integers in [0, " +
                                          std::to_string(tokenizer.vocab_size()) + "), got " +
                                          id.dump());
      }
      ids.push_back(id.get<int32_t>());
    }
    return Json(tokenizer.Decode(ids, f.skip_special_tokens)).dump();
  }
  if (input.is_string()) {
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(input.get<std::string>());
    if (!ids.ok()) return ids.status();
    return Json(*ids).dump();
  }
  if (!input.is_object()) {
    return absl::InvalidArgumentError("expected a JSON string (text) or object (chat)");
  }
  absl::StatusOr<gemma::ChatInput> chat = ToChatInput(input);
  if (!chat.ok()) return chat.status();
  if (f.render) {
    absl::StatusOr<std::string> text = gemma::RenderChatText(chat_template, tokenizer, *chat);
    if (!text.ok()) return text.status();
    return Json(*text).dump();
  }
  absl::StatusOr<std::vector<int32_t>> ids = gemma::RenderChatIds(chat_template, tokenizer, *chat);
  if (!ids.ok()) return ids.status();
  return Json(*ids).dump();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gemma-tokenize: JSON Lines in (text or chat), token ids out"};
  Flags f;
  app.add_option("--model", f.model, "model directory (its tokenizer and chat template)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--tokenizer", f.tokenizer, "tokenizer.json or tokenizer.model (instead of --model's)")
      ->check(CLI::ExistingFile);
  app.add_option("--chat-template", f.chat_template, "Jinja chat template file")
      ->check(CLI::ExistingFile);
  app.add_flag("--render", f.render, "print the rendered chat text (a JSON string) instead of ids");
  app.add_flag("--decode", f.decode, "read JSON arrays of ids, print JSON strings");
  app.add_flag("--skip-special-tokens", f.skip_special_tokens,
               "--decode: leave special tokens out (default: keep them, as decode(ids) does)");
  CLI11_PARSE(app, argc, argv);
  if (f.model.empty() && f.tokenizer.empty()) return Fail("one of --model or --tokenizer is required");
  if (f.render && f.decode) return Fail("--render and --decode exclude each other");

  auto tokenizer = gemma::Tokenizer::Load(!f.tokenizer.empty() ? f.tokenizer : f.model);
  if (!tokenizer.ok()) return Fail(tokenizer.status().ToString());
  absl::StatusOr<gemma::ChatTemplate> chat_template =
      gemma::LoadServingChatTemplate(f.chat_template, f.model);
  if (!chat_template.ok()) return Fail(chat_template.status().ToString());

  std::string line;
  for (int number = 1; std::getline(std::cin, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const Json input = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    absl::StatusOr<std::string> out =
        input.is_discarded() ? absl::InvalidArgumentError("not valid JSON")
                             : ProcessLine(input, f, **tokenizer, *chat_template);
    if (!out.ok()) return Fail("line " + std::to_string(number) + ": " + std::string(out.status().message()));
    std::fwrite(out->data(), 1, out->size(), stdout);
    std::fputc('\n', stdout);
  }
  return 0;
}
