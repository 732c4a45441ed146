#include "engine/chat/chat_prompt.h"

#include <string_view>

namespace gemma {

extern const std::string_view kGemma4ChatTemplateSource;  // gemma4_template.cc (generated)

absl::StatusOr<std::string> RenderChatText(const ChatTemplate& chat_template,
                                           const Tokenizer& tokenizer, const ChatInput& chat) {
  return chat_template.Render(chat.messages, chat.tools, chat.add_generation_prompt,
                              chat.template_kwargs, tokenizer.IdToPiece(tokenizer.special().bos),
                              tokenizer.IdToPiece(tokenizer.special().eos));
}

absl::StatusOr<std::vector<int32_t>> RenderChatIds(const ChatTemplate& chat_template,
                                                   const Tokenizer& tokenizer,
                                                   const ChatInput& chat) {
  absl::StatusOr<std::string> text = RenderChatText(chat_template, tokenizer, chat);
  if (!text.ok()) return text.status();
  return tokenizer.Encode(*text);
}

bool ChatEnablesThinking(const ChatInput& chat) {
  const auto it = chat.template_kwargs.find("enable_thinking");
  return it != chat.template_kwargs.end() && it->is_boolean() && it->get<bool>();
}

absl::StatusOr<ChatTemplate> LoadServingChatTemplate(const std::string& template_file,
                                                     const std::string& model_dir) {
  if (!template_file.empty()) return ChatTemplate::LoadFile(template_file);
  if (!model_dir.empty()) {
    absl::StatusOr<ChatTemplate> loaded = ChatTemplate::LoadFromModelDir(model_dir);
    if (loaded.ok() || !absl::IsNotFound(loaded.status())) return loaded;
  }
  return DefaultGemma4ChatTemplate();
}

const ChatTemplate& DefaultGemma4ChatTemplate() {
  // Parsed once; the source is a constant of the binary, tested to parse.
  static const ChatTemplate* const kTemplate = [] {
    absl::StatusOr<ChatTemplate> parsed =
        ChatTemplate::Parse(std::string(kGemma4ChatTemplateSource), "gemma4 chat template (built in)");
    return new ChatTemplate(*std::move(parsed));
  }();
  return *kTemplate;
}

}  // namespace gemma
