// tool_choice "required" and a named function on /v1/chat/completions: the
// prompt ends with the forced call's opening (`<|tool_call>call:` or
// `<|tool_call>call:NAME{`, counted as prompt tokens), and the output parser
// reads it as the output's start, so a call the model closes comes back in
// tool_calls with the forced name. The fortunes model does not write tool
// calls on its own: what it generates after the opening is random, so the
// asserts cover what the server guarantees (the opening, its accounting, and
// that the answer is either a parsed call of that function or content that
// begins with the opening), not the model's choices. Also chat.forced_tool_call
// over gRPC. Real HTTP / gRPC over loopback, in-process gemma-serve.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server/http_test_client.h"
#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

using Json = nlohmann::json;

constexpr char kModel[] = "gemma4-fortunes";
constexpr int kMaxTokens = 12;

Json Tool(const std::string& name) {
  return {{"type", "function"},
          {"function", {{"name", name},
                        {"description", "Looks something up"},
                        {"parameters", {{"type", "object"},
                                        {"properties", {{"city", {{"type", "string"}}}}}}}}}};
}

Json ToolRequest(const Json& tools, const Json& tool_choice) {
  Json body = {{"model", kModel},
               {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
               {"tools", tools},
               {"temperature", 0},
               {"max_tokens", kMaxTokens},
               {"chat_template_kwargs", {{"enable_thinking", false}}}};
  if (!tool_choice.is_null()) body["tool_choice"] = tool_choice;
  return body;
}

Json Named(const std::string& name) {
  return {{"type", "function"}, {"function", {{"name", name}}}};
}

class ToolChoiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions options = TestServerOptions();
    options.http_port = 0;
    server_ = StartTestServer(options).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }
  int port() const { return server_->http_port(); }
  // Tokens of `text` as the prompt's tail (special tokens spelled out).
  int TokenCount(const std::string& text) const {
    HttpReply reply = Post(port(), "/tokenize", {{"prompt", text}, {"add_special_tokens", false}});
    EXPECT_EQ(reply.status, 200) << reply.body;
    return reply.Json()["count"].get<int>();
  }
  int PromptTokens(const Json& body) const {
    HttpReply reply = Post(port(), "/v1/chat/completions", body);
    EXPECT_EQ(reply.status, 200) << reply.body;
    return reply.Json()["usage"]["prompt_tokens"].get<int>();
  }
  static GemmaServer* server_;
};
GemmaServer* ToolChoiceTest::server_ = nullptr;

// The guarantee for a forced call: a parsed call (of `name` when given), or
// the unfinished call as content beginning with the opening.
void ExpectForcedCall(const Json& tool_calls, const std::string& content,
                      const std::string& finish_reason, const std::string& opening,
                      const std::string& name) {
  if (!tool_calls.is_null() && !tool_calls.empty()) {
    if (!name.empty()) EXPECT_EQ(tool_calls[0]["function"]["name"], name);
    EXPECT_TRUE(tool_calls[0]["function"]["arguments"].is_string());
    EXPECT_EQ(finish_reason, "tool_calls");
    return;
  }
  EXPECT_EQ(content.rfind(opening, 0), 0u) << "content: " << content;
}

TEST_F(ToolChoiceTest, NamedFunctionOpensTheCall) {
  const Json both = {Tool("get_weather"), Tool("get_time")};
  const std::string opening = "<|tool_call>call:get_weather{";
  // A named function keeps only its declaration; the opening follows.
  const int auto_tokens = PromptTokens(ToolRequest(Json::array({Tool("get_weather")}), "auto"));
  HttpReply reply = Post(port(), "/v1/chat/completions", ToolRequest(both, Named("get_weather")));
  ASSERT_EQ(reply.status, 200) << reply.body;
  const Json body = reply.Json();
  EXPECT_EQ(body["usage"]["prompt_tokens"].get<int>(), auto_tokens + TokenCount(opening));
  const int completion = body["usage"]["completion_tokens"].get<int>();
  EXPECT_GE(completion, 1);
  EXPECT_LE(completion, kMaxTokens);
  const Json& choice = body["choices"][0];
  ExpectForcedCall(choice["message"].value("tool_calls", Json()),
                   choice["message"].value("content", Json("")).is_string()
                       ? choice["message"]["content"].get<std::string>() : "",
                   choice["finish_reason"], opening, "get_weather");
  // /tokenize renders the same prompt, opening included.
  Json tokenize = ToolRequest(both, Named("get_weather"));
  EXPECT_EQ(Post(port(), "/tokenize", tokenize).Json()["count"],
            body["usage"]["prompt_tokens"]);
}

TEST_F(ToolChoiceTest, NamedFunctionStreams) {
  const std::string opening = "<|tool_call>call:get_weather{";
  Json request = ToolRequest({Tool("get_weather"), Tool("get_time")}, Named("get_weather"));
  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  HttpReply reply = Post(port(), "/v1/chat/completions", request);
  ASSERT_EQ(reply.status, 200) << reply.body;
  bool done = false;
  std::string content, finish_reason;
  Json tool_calls = Json::array();
  int completion = -1;
  for (const Json& event : SseEvents(reply.body, &done)) {
    if (event.contains("usage") && event["usage"].is_object()) {
      completion = event["usage"]["completion_tokens"];
    }
    if (event["choices"].empty()) continue;
    const Json& choice = event["choices"][0];
    const Json& delta = choice["delta"];
    if (delta.contains("content") && delta["content"].is_string()) content += delta["content"];
    if (delta.contains("tool_calls")) {
      for (const Json& call : delta["tool_calls"]) {
        if (call.contains("function") && call["function"].contains("name")) {
          tool_calls.push_back(call);
        }
      }
    }
    if (choice["finish_reason"].is_string()) finish_reason = choice["finish_reason"];
  }
  EXPECT_TRUE(done);
  EXPECT_GE(completion, 1);
  EXPECT_LE(completion, kMaxTokens);
  ExpectForcedCall(tool_calls, content, finish_reason, opening, "get_weather");
}

TEST_F(ToolChoiceTest, RequiredOpensACall) {
  const Json both = {Tool("get_weather"), Tool("get_time")};
  const std::string opening = "<|tool_call>call:";
  const int auto_tokens = PromptTokens(ToolRequest(both, "auto"));
  HttpReply reply = Post(port(), "/v1/chat/completions", ToolRequest(both, "required"));
  ASSERT_EQ(reply.status, 200) << reply.body;
  const Json body = reply.Json();
  EXPECT_EQ(body["usage"]["prompt_tokens"].get<int>(), auto_tokens + TokenCount(opening));
  const Json& choice = body["choices"][0];
  const Json content = choice["message"].value("content", Json(""));
  // Any name the model writes is returned as parsed (documented: not checked
  // against tools).
  ExpectForcedCall(choice["message"].value("tool_calls", Json()),
                   content.is_string() ? content.get<std::string>() : "", choice["finish_reason"],
                   opening, "");
}

TEST_F(ToolChoiceTest, NoneAndAutoAreUnforced) {
  const Json both = {Tool("get_weather"), Tool("get_time")};
  Json plain = ToolRequest(both, nullptr);
  plain.erase("tools");
  const int base = PromptTokens(plain);
  const int with_tools = PromptTokens(ToolRequest(both, nullptr));
  EXPECT_GT(with_tools, base);
  EXPECT_EQ(PromptTokens(ToolRequest(both, "auto")), with_tools);
  EXPECT_EQ(PromptTokens(ToolRequest(both, "none")), base);
  // The same greedy answer with and without "auto": nothing was forced.
  const Json a = Post(port(), "/v1/chat/completions", ToolRequest(both, nullptr)).Json();
  const Json b = Post(port(), "/v1/chat/completions", ToolRequest(both, "auto")).Json();
  EXPECT_EQ(a["choices"][0]["message"], b["choices"][0]["message"]);
}

TEST_F(ToolChoiceTest, BadChoicesAreRefused) {
  const Json tools = Json::array({Tool("get_weather")});
  EXPECT_EQ(Post(port(), "/v1/chat/completions", ToolRequest(tools, Named("nope"))).status, 400);
  Json no_tools = ToolRequest(tools, "required");
  no_tools.erase("tools");
  EXPECT_EQ(Post(port(), "/v1/chat/completions", no_tools).status, 400);
}

// The gRPC field behind it: validated, and the same opening.
TEST_F(ToolChoiceTest, GrpcForcedToolCall) {
  auto stub = NewStub(server_->address());
  v1::GenerateRequest request;
  v1::ChatMessage* message = request.mutable_chat()->add_messages();
  message->set_role("user");
  message->set_content("Weather in Paris?");
  request.mutable_chat()->set_tools(Json::array({Tool("get_weather")}).dump());
  request.mutable_chat()->set_template_kwargs(R"({"enable_thinking": false})");
  request.mutable_sampling()->set_temperature(0);
  request.mutable_stopping()->set_max_tokens(kMaxTokens);
  request.mutable_chat()->set_forced_tool_call("nope");
  StreamResult refused = RunStream(*stub, request);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.status.error_message().find("chat.forced_tool_call"), std::string::npos)
      << refused.status.error_message();
  request.mutable_chat()->set_add_generation_prompt(false);
  request.mutable_chat()->set_forced_tool_call("get_weather");
  EXPECT_EQ(RunStream(*stub, request).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  request.mutable_chat()->clear_add_generation_prompt();
  StreamResult forced = RunStream(*stub, request);
  ASSERT_TRUE(forced.status.ok()) << forced.status.error_message();
  ASSERT_TRUE(forced.has_finish);
  if (!forced.tool_calls.empty()) {
    EXPECT_EQ(forced.tool_calls[0].name(), "get_weather");
  } else {
    EXPECT_EQ(forced.text.rfind("<|tool_call>call:get_weather{", 0), 0u) << forced.text;
  }
}

}  // namespace
}  // namespace gemma::server::testing
