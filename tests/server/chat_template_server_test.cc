// The server's chat path: the model's own template (or --chat-template),
// errors a client can cause (a template that raises, vision parts, bad tools
// or template variables), and a template the interpreter cannot run, which
// fails start-up naming file and line.
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

namespace fs = std::filesystem;

std::string WriteTemplate(const std::string& name, const std::string& source) {
  const fs::path path = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".jinja");
  std::ofstream(path) << source;
  return path.string();
}

grpc::Status TokenizeChat(GemmaServer& server, const v1::Chat& chat, v1::TokenizeResponse* out) {
  auto stub = NewStub(server.address());
  v1::TokenizeRequest request;
  *request.mutable_chat() = chat;
  grpc::ClientContext context;
  return stub->Tokenize(&context, request, out);
}

v1::Chat UserSays(const std::string& text) {
  v1::Chat chat;
  v1::ChatMessage* m = chat.add_messages();
  m->set_role("user");
  m->set_content(text);
  return chat;
}

TEST(ChatTemplateServerTest, UnsupportedTemplateFailsStartUpNamingFileAndLine) {
  ServerOptions options = TestServerOptions();
  options.chat_template_path =
      WriteTemplate("bad", "{{ bos_token }}\n{% for m in messages %}{{ m.content }}{% endfor %}\n"
                           "{% include 'other.jinja' %}\n");
  auto server = GemmaServer::Start(options);
  ASSERT_TRUE(server.ok());
  const absl::Status loaded = (*server)->Load();
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.message().find(options.chat_template_path), std::string::npos) << loaded;
  EXPECT_NE(loaded.message().find(":3"), std::string::npos) << loaded;
  EXPECT_NE(loaded.message().find("include"), std::string::npos) << loaded;
}

TEST(ChatTemplateServerTest, TemplateRaiseIsInvalidArgumentWithItsMessage) {
  ServerOptions options = TestServerOptions();
  options.chat_template_path = WriteTemplate(
      "raising", "{% if messages[0]['role'] != 'system' %}"
                 "{{ raise_exception('the first message must be a system message') }}{% endif %}"
                 "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}");
  auto server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  v1::TokenizeResponse response;
  grpc::Status status = TokenizeChat(*server, UserSays("hi"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "the first message must be a system message");
  // Generate says the same; a conversation the template accepts renders.
  auto stub = NewStub(server->address());
  v1::GenerateRequest request = GreedyText("", 4);
  *request.mutable_chat() = UserSays("hi");
  StreamResult result = RunStream(*stub, request);
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::Chat ok = UserSays("hi");
  v1::ChatMessage* system = ok.mutable_messages()->Add();
  system->set_role("system");
  system->set_content("rules");
  ok.mutable_messages()->SwapElements(0, 1);
  ASSERT_TRUE(TokenizeChat(*server, ok, &response).ok());
  EXPECT_EQ(response.ids(0), server->tokenizer()->special().bos);
}

TEST(ChatTemplateServerTest, ClientErrorsNameTheField) {
  auto server = StartTestServer();
  ASSERT_NE(server, nullptr);
  v1::TokenizeResponse response;
  struct Case {
    std::string name;
    std::function<void(v1::Chat*)> edit;
    std::string field, words;
  };
  const std::vector<Case> cases = {
      {"image part",
       [](v1::Chat* c) {
         c->mutable_messages(0)->clear_content();
         v1::ContentPart* part = c->mutable_messages(0)->add_content_parts();
         part->set_type("image_url");
       },
       "chat.messages[0].content_parts[0].type", "vision input is not supported"},
      {"tools not json", [](v1::Chat* c) { c->set_tools("[{"); }, "chat.tools", "not valid JSON"},
      {"tool without a name",
       [](v1::Chat* c) { c->set_tools(R"([{"type": "function", "function": {}}])"); },
       "chat.tools[0].function.name", "non-empty string"},
      {"kwargs not an object", [](v1::Chat* c) { c->set_template_kwargs("[1]"); },
       "chat.template_kwargs", "JSON object"},
      {"reserved kwarg", [](v1::Chat* c) { c->set_template_kwargs(R"({"messages": []})"); },
       "chat.template_kwargs.messages", "set by the server"},
      {"unknown role", [](v1::Chat* c) { c->mutable_messages(0)->set_role("robot"); },
       "chat.messages[0].role", "robot"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::Chat chat = UserSays("hi");
    c.edit(&chat);
    grpc::Status status = TokenizeChat(*server, chat, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find(c.field), std::string::npos) << status.error_message();
    EXPECT_NE(status.error_message().find(c.words), std::string::npos) << status.error_message();
  }
}

TEST(ChatTemplateServerTest, ToolsThinkingAndToolTurnsReachTheTemplate) {
  auto server = StartTestServer();
  ASSERT_NE(server, nullptr);
  v1::Chat chat = UserSays("Weather in Paris?");
  chat.set_tools(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  chat.set_template_kwargs(R"({"enable_thinking": true})");
  v1::ChatMessage* model = chat.add_messages();
  model->set_role("assistant");
  v1::ToolCall* call = model->add_tool_calls();
  call->set_id("call_1");
  call->set_name("get_weather");
  call->set_arguments(R"({"city": "Paris"})");
  v1::ChatMessage* tool = chat.add_messages();
  tool->set_role("tool");
  tool->set_name("get_weather");
  tool->set_tool_call_id("call_1");
  tool->set_content("sunny");
  v1::TokenizeResponse response;
  ASSERT_TRUE(TokenizeChat(*server, chat, &response).ok());
  const std::vector<int32_t> ids(response.ids().begin(), response.ids().end());
  const std::string text = server->tokenizer()->Decode(ids, /*skip_special_tokens=*/false);
  // The official template: <|think|> in the system turn, the declaration, the
  // call in Gemma's syntax, the tool's turn, and no empty thought channel
  // (thinking is on).
  EXPECT_NE(text.find("<|turn>system\n<|think|><|tool>declaration:get_weather{"), std::string::npos) << text;
  EXPECT_NE(text.find("<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>"),
            std::string::npos) << text;
  EXPECT_NE(text.find("<|turn>tool\nsunny<turn|>"), std::string::npos) << text;
  EXPECT_TRUE(text.ends_with("<|turn>model\n")) << text;
}

}  // namespace
}  // namespace gemma::server::testing
