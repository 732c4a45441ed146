// The OpenAI-compatible front over real HTTP on loopback, against an
// in-process gemma-serve (CPU backend, fortunes model): every endpoint, the
// request fields, the error replies, streaming, and cancellation on
// disconnect (the KV pool is whole again afterwards).
#include <sys/socket.h>
#include <tuple>
#include <vector>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "gtest/gtest.h"
#include "tests/server/http_test_client.h"
#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

using Json = nlohmann::json;

constexpr char kModel[] = "gemma4-fortunes";

ServerOptions HttpOptions() {
  ServerOptions options = TestServerOptions();
  options.http_port = 0;
  return options;
}

Json Greedy(Json body, int max_tokens) {
  body["temperature"] = 0;
  body["max_tokens"] = max_tokens;
  body["ignore_eos"] = true;
  return body;
}

Json ChatBody(const std::string& text) {
  return {{"model", kModel}, {"messages", {{{"role", "user"}, {"content", text}}}}};
}

void ExpectError(const HttpReply& reply, int status, const std::string& param,
                 const std::string& words = "") {
  EXPECT_EQ(reply.status, status) << reply.body;
  const Json error = reply.Json()["error"];
  ASSERT_TRUE(error.is_object()) << reply.body;
  EXPECT_TRUE(error["message"].is_string());
  EXPECT_TRUE(error.contains("type"));
  EXPECT_EQ(error["code"], status);
  if (!param.empty()) {
    EXPECT_EQ(error["param"], param) << reply.body;
  }
  if (!words.empty()) {
    EXPECT_NE(error["message"].get<std::string>().find(words), std::string::npos) << reply.body;
  }
}

class OpenAiHttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartTestServer(HttpOptions()).release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }
  int port() const { return server_->http_port(); }
  bool KvWhole() const {
    const EngineStats s = server_->engine()->Stats();
    return s.running == 0 && s.waiting == 0 && s.kv_free_blocks == s.kv_total_blocks;
  }
  static GemmaServer* server_;
};
GemmaServer* OpenAiHttpTest::server_ = nullptr;

TEST_F(OpenAiHttpTest, HealthAndModels) {
  EXPECT_EQ(HttpCall(port(), "GET", "/health").status, 200);
  HttpReply models = HttpCall(port(), "GET", "/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(models.Json()["object"], "list");
  EXPECT_EQ(models.Json()["data"][0]["id"], kModel);
  EXPECT_EQ(HttpCall(port(), "GET", std::string("/v1/models/") + kModel).status, 200);
  EXPECT_EQ(HttpCall(port(), "GET", "/v1/models/nope").status, 404);
}

TEST_F(OpenAiHttpTest, CompletionMatchesGrpc) {
  HttpReply reply = Post(port(), "/v1/completions",
                         Greedy({{"model", kModel}, {"prompt", "The quick brown fox"}}, 6));
  ASSERT_EQ(reply.status, 200) << reply.body;
  const Json body = reply.Json();
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(body["model"], kModel);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 6);
  EXPECT_GT(body["usage"]["prompt_tokens"].get<int>(), 0);
  EXPECT_TRUE(body["usage"]["prompt_tokens_details"].contains("cached_tokens"));
  auto stub = NewStub(server_->address());
  StreamResult grpc = RunStream(*stub, GreedyText("The quick brown fox", 6));
  ASSERT_TRUE(grpc.status.ok());
  EXPECT_EQ(body["choices"][0]["text"], grpc.text);
}

TEST_F(OpenAiHttpTest, CompletionPromptForms) {
  HttpReply ids = Post(port(), "/tokenize", {{"prompt", "Fortune"}});
  ASSERT_EQ(ids.status, 200) << ids.body;
  const Json tokens = ids.Json()["tokens"];
  EXPECT_EQ(ids.Json()["count"], tokens.size());
  for (const Json& prompt : {Json("Fortune"), Json({"Fortune", "Luck"}), tokens, Json({tokens, tokens})}) {
    HttpReply reply = Post(port(), "/v1/completions", Greedy({{"prompt", prompt}, {"n", 2}}, 3));
    ASSERT_EQ(reply.status, 200) << reply.body;
    const size_t num_prompts = prompt.is_array() && prompt[0].is_array() ? 2
                               : prompt.is_array() && prompt[0].is_string() ? 2 : 1;
    const Json choices = reply.Json()["choices"];
    ASSERT_EQ(choices.size(), 2 * num_prompts);
    for (size_t i = 0; i < choices.size(); ++i) EXPECT_EQ(choices[i]["index"], i);
    // Greedy: both samples of one prompt agree.
    EXPECT_EQ(choices[0]["text"], choices[1]["text"]);
  }
}

TEST_F(OpenAiHttpTest, CompletionEchoAndLogprobs) {
  HttpReply reply = Post(port(), "/v1/completions",
                         Greedy({{"prompt", "Fortune"}, {"echo", true}, {"logprobs", 2}}, 3));
  ASSERT_EQ(reply.status, 200) << reply.body;
  const Json choice = reply.Json()["choices"][0];
  EXPECT_EQ(choice["text"].get<std::string>().rfind("Fortune", 0), 0u);
  EXPECT_EQ(choice["logprobs"]["tokens"].size(), 3u);
  EXPECT_EQ(choice["logprobs"]["top_logprobs"][0].size(), 2u);
}

TEST_F(OpenAiHttpTest, ChatCompletion) {
  Json body = Greedy(ChatBody("Tell me a fortune"), 5);
  body["logprobs"] = true;
  body["top_logprobs"] = 2;
  HttpReply reply = Post(port(), "/v1/chat/completions", body);
  ASSERT_EQ(reply.status, 200) << reply.body;
  const Json out = reply.Json();
  EXPECT_EQ(out["object"], "chat.completion");
  EXPECT_EQ(out["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(out["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(out["choices"][0]["message"]["content"].is_string());
  EXPECT_EQ(out["choices"][0]["logprobs"]["content"].size(), 5u);
  EXPECT_EQ(out["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size(), 2u);
  // Content as a list of text parts renders the same prompt.
  Json parts = Greedy(ChatBody(""), 5);
  parts["messages"][0]["content"] = Json::array({{{"type", "text"}, {"text", "Tell me a fortune"}}});
  HttpReply same = Post(port(), "/v1/chat/completions", parts);
  ASSERT_EQ(same.status, 200) << same.body;
  EXPECT_EQ(same.Json()["usage"]["prompt_tokens"], out["usage"]["prompt_tokens"]);
  EXPECT_EQ(same.Json()["choices"][0]["message"]["content"], out["choices"][0]["message"]["content"]);
  // The same prompt again: its prefix comes from the cache.
  EXPECT_GT(same.Json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
}

TEST_F(OpenAiHttpTest, ChatStreamWithUsage) {
  Json body = Greedy(ChatBody("Tell me a fortune"), 6);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  HttpReply reply = Post(port(), "/v1/chat/completions", body);
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.content_type, "text/event-stream");
  bool done = false;
  std::vector<Json> events = SseEvents(reply.body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const Json& choice = events[i]["choices"][0];
    if (choice["delta"].contains("content")) text += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    EXPECT_TRUE(events[i]["usage"].is_null());
  }
  EXPECT_EQ(finish, "length");
  EXPECT_TRUE(events.back()["choices"].empty());
  EXPECT_EQ(events.back()["usage"]["completion_tokens"], 6);
  body["stream"] = false;
  ExpectError(Post(port(), "/v1/chat/completions", body), 400, "stream_options", "needs stream: true");
  body.erase("stream_options");
  HttpReply whole = Post(port(), "/v1/chat/completions", body);
  EXPECT_EQ(whole.Json()["choices"][0]["message"]["content"], text);
}

TEST_F(OpenAiHttpTest, CompletionStream) {
  Json body = Greedy({{"prompt", "The quick brown fox"}, {"stream", true}}, 5);
  HttpReply reply = Post(port(), "/v1/completions", body);
  ASSERT_EQ(reply.status, 200) << reply.body;
  bool done = false;
  std::string text;
  for (const Json& e : SseEvents(reply.body, &done)) {
    EXPECT_EQ(e["object"], "text_completion");
    text += e["choices"][0]["text"].get<std::string>();
  }
  EXPECT_TRUE(done);
  body["stream"] = false;
  EXPECT_EQ(Post(port(), "/v1/completions", body).Json()["choices"][0]["text"], text);
}

TEST_F(OpenAiHttpTest, StopsAndSeeds) {
  HttpReply first = Post(port(), "/v1/completions",
                         Greedy({{"prompt", "The quick brown fox"}}, 8));
  const std::string text = first.Json()["choices"][0]["text"];
  ASSERT_GE(text.size(), 3u);
  Json stop = Greedy({{"prompt", "The quick brown fox"}, {"stop", text.substr(1, 2)}}, 8);
  stop["ignore_eos"] = false;
  HttpReply stopped = Post(port(), "/v1/completions", stop);
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  EXPECT_EQ(stopped.Json()["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(stopped.Json()["choices"][0]["stop_reason"], text.substr(1, 2));
  Json seeded = {{"prompt", "Fortune"}, {"temperature", 1.0}, {"seed", 7}, {"max_tokens", 8},
                 {"top_k", -1}, {"min_p", 0.01}, {"presence_penalty", 0.5},
                 {"frequency_penalty", 0.1}, {"repetition_penalty", 1.1}, {"min_tokens", 2},
                 {"stop_token_ids", {1}}, {"skip_special_tokens", true}};
  HttpReply a = Post(port(), "/v1/completions", seeded);
  HttpReply b = Post(port(), "/v1/completions", seeded);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.Json()["choices"][0]["text"], b.Json()["choices"][0]["text"]);
}

TEST_F(OpenAiHttpTest, ToolRequestsRender) {
  const Json tools = {{{"type", "function"},
                       {"function", {{"name", "get_weather"},
                                     {"description", "Weather of a city"},
                                     {"parameters", {{"type", "object"},
                                                     {"properties", {{"city", {{"type", "string"}}}}}}}}}}};
  Json plain = ChatBody("Weather in Paris?");
  Json with_tools = plain;
  with_tools["tools"] = tools;
  const int base = Post(port(), "/tokenize", plain).Json()["count"];
  EXPECT_GT(Post(port(), "/tokenize", with_tools).Json()["count"].get<int>(), base);
  with_tools["tool_choice"] = "none";
  EXPECT_EQ(Post(port(), "/tokenize", with_tools).Json()["count"].get<int>(), base);
  // A whole tool round: assistant call (arguments as a JSON string), tool answer.
  Json round = Greedy(ChatBody("Weather in Paris?"), 4);
  round["tools"] = tools;
  round["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  round["messages"].push_back({{"role", "assistant"}, {"content", nullptr},
                               {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                                                {"function", {{"name", "get_weather"},
                                                              {"arguments", "{\"city\":\"Paris\"}"}}}}}}});
  round["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}});
  round["chat_template_kwargs"] = {{"enable_thinking", false}};
  HttpReply reply = Post(port(), "/v1/chat/completions", round);
  ASSERT_EQ(reply.status, 200) << reply.body;
  const Json message = reply.Json()["choices"][0]["message"];
  EXPECT_TRUE(message["tool_calls"].is_array());
  round["tool_choice"] = {{"type", "function"}, {"function", {{"name", "nope"}}}};
  EXPECT_EQ(Post(port(), "/v1/chat/completions", round).status, 400);
}

TEST_F(OpenAiHttpTest, TokenizeDetokenize) {
  HttpReply ids = Post(port(), "/tokenize", {{"prompt", "Hello world"}, {"add_special_tokens", false}});
  ASSERT_EQ(ids.status, 200) << ids.body;
  HttpReply text = Post(port(), "/detokenize", {{"tokens", ids.Json()["tokens"]}});
  ASSERT_EQ(text.status, 200) << text.body;
  EXPECT_EQ(text.Json()["prompt"], "Hello world");
  EXPECT_EQ(Post(port(), "/detokenize", {{"tokens", {-5}}}).status, 400);
}


TEST_F(OpenAiHttpTest, BadFieldsAreNamed) {
  Json body = ChatBody("hi");
  body["temperature"] = "hot";
  ExpectError(Post(port(), "/v1/chat/completions", body), 400, "temperature");
  body = ChatBody("hi");
  body["top_p"] = 1.5;
  ExpectError(Post(port(), "/v1/chat/completions", body), 400, "top_p");
  body = ChatBody("hi");
  body["messages"][0]["content"] = Json::array({{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}});
  ExpectError(Post(port(), "/v1/chat/completions", body), 400, "messages[0].content[0].type",
              "vision input is not supported");
  body = ChatBody("hi");
  body["messages"][0]["role"] = "wizard";
  ExpectError(Post(port(), "/v1/chat/completions", body), 400, "messages[0].role");
  ExpectError(Post(port(), "/v1/completions", {{"prompt", "x"}, {"max_tokens", 0}}), 400, "max_tokens");
  ExpectError(Post(port(), "/v1/completions", {{"prompt", "x"}, {"n", 0}}), 400, "n");
  ExpectError(Post(port(), "/v1/completions", {{"prompt", "x"}, {"stop", 3}}), 400, "stop");
  ExpectError(Post(port(), "/v1/completions", {{"max_tokens", 3}}), 400, "prompt");
  ExpectError(HttpCall(port(), "POST", "/v1/completions", "{not json"), 400, "body");
  ExpectError(Post(port(), "/v1/completions", {{"model", "gpt-4"}, {"prompt", "x"}}), 404, "model");
  ExpectError(HttpCall(port(), "GET", "/v2/nothing"), 404, "");
  ExpectError(HttpCall(port(), "GET", "/v1/completions"), 405, "");
}

// Fields of the OpenAI API that the server does not implement are refused by
// name, never dropped; malformed tools and content are refused whatever
// tool_choice says; ids past int64 are not wrapped into range.
TEST_F(OpenAiHttpTest, UnsupportedAndMalformedFieldsAreRefused) {
  const std::vector<std::tuple<std::string, Json, std::string, std::string>> cases = {
      {"/v1/completions", {{"prompt", "x"}, {"logit_bias", {{"272", -100}}}}, "logit_bias", "not supported"},
      {"/v1/completions", {{"prompt", "x"}, {"best_of", 5}}, "best_of", "got 5"},
      {"/v1/completions", {{"prompt", "x"}, {"suffix", "end"}}, "suffix", "not supported"},
      {"/v1/completions", {{"prompt", "x"}, {"user", 5}}, "user", "must be a string"},
      {"/v1/completions", {{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}}, "stream_options",
       "needs stream: true"},
      {"/v1/completions", {{"prompt", {{uint64_t{18446744073709551615u}}}}}, "prompt", "18446744073709551615"},
      {"/v1/completions", {{"prompt", "x"}, {"response_format", {{"type", 5}}}}, "response_format", "not supported"},
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}}}}}, "messages[0].content", "must be set"},
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", nullptr}}}}}, "messages[0].content",
       "must be set"},
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"top_logprobs", 50},
                                {"logprobs", true}}, "top_logprobs", "got 50"},
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                {"functions", {{{"name", "f"}}}}}, "functions", "use tools"},
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                {"parallel_tool_calls", "yes"}}, "parallel_tool_calls", "true or false"},
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"tools", "garbage"},
                                {"tool_choice", "none"}}, "tools", "must be a list"},
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                {"tools", {{{"type", "retrieval"}, {"function", {{"name", "f"}}}}}}},
       "tools[0].type", "retrieval"},
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}}}}},
       "tools[0].function.parameters", "JSON Schema object"},
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
                                {"tool_choice", {{"type", "banana"}, {"function", {{"name", "f"}}}}}},
       "tool_choice", ""},
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}},
                                              {{"role", "assistant"},
                                               {"tool_calls", {{{"id", 5}, {"function", {{"name", "f"}}}}}}}}}},
       "messages[1].tool_calls[0].id", "must be a string"},
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                {"tools", {{{"type", "function"},
                                            {"function", {{"name", "f"}, {"parameters", {{"type", "object"},
                                                                                          {"properties", 5}}}}}}}}},
       "tools[0].function.parameters.properties", "must be an object"},
      {"/tokenize", {{"prompt", "x"}, {"return_token_strs", "yes"}}, "return_token_strs", "true or false"},
      {"/detokenize", {{"tokens", {"a"}}}, "tokens", "token ids"},
      {"/detokenize", {{"tokens", {uint64_t{18446744073709551615u}}}}, "tokens", "token ids"},
  };
  for (const auto& [path, body, param, words] : cases) {
    SCOPED_TRACE(path + " " + body.dump());
    ExpectError(Post(port(), path, body), 400, param, words);
  }
  // Still serving; the fields' neutral values pass.
  Json neutral = Greedy({{"prompt", "x"}, {"logit_bias", Json::object()}, {"best_of", 1}, {"suffix", ""},
                         {"user", "u-1"}}, 2);
  HttpReply neutral_reply = Post(port(), "/v1/completions", neutral);
  EXPECT_EQ(neutral_reply.status, 200) << neutral_reply.body;
  Json calls_only = Greedy({{"messages", {{{"role", "user"}, {"content", "hi"}},
                                          {{"role", "assistant"}, {"tool_calls", {{{"id", "c1"}, {"type", "function"},
                                            {"function", {{"name", "f"}, {"arguments", "{}"}}}}}}},
                                          {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "ok"}}}},
                            {"parallel_tool_calls", true}}, 2);
  EXPECT_EQ(Post(port(), "/v1/chat/completions", calls_only).status, 200);
}

// A 40 KB body of brackets nested 20 000 deep, wherever it sits, is refused
// by name before anything walks it recursively; the server serves on.
TEST_F(OpenAiHttpTest, DeeplyNestedJsonIsRefused) {
  const std::string deep = std::string(20000, '[') + std::string(20000, ']');
  const std::string user = R"("messages":[{"role":"user","content":"hi"}])";
  const std::string tools =
      "{" + user + R"(,"tools":[{"type":"function","function":{"name":"f","parameters":{"x":)" + deep + "}}}]}";
  HttpReply reply = HttpCall(port(), "POST", "/v1/chat/completions", tools);
  ExpectError(reply, 400, "", "nests deeper than 128 levels");
  EXPECT_EQ(reply.Json()["error"]["param"].get<std::string>().rfind("tools[0].function.parameters.x[0]", 0), 0u)
      << reply.body;
  const std::string kwargs = "{" + user + R"(,"chat_template_kwargs":{"k":)" + deep + "}}";
  ExpectError(HttpCall(port(), "POST", "/tokenize", kwargs), 400, "", "nests deeper than 128 levels");
  // Arguments sent as a JSON string are parsed later, and refused there.
  const std::string call = "{" + user.substr(0, user.size() - 1) +
                           R"(,{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":)" +
                           deep + R"(}"}}]}]})";
  ExpectError(HttpCall(port(), "POST", "/v1/chat/completions", call), 400, "messages[1].tool_calls[0].arguments",
              "nests deeper than 128 levels");
  EXPECT_EQ(Post(port(), "/v1/completions", Greedy({{"prompt", "x"}}, 2)).status, 200);
}

TEST_F(OpenAiHttpTest, MoreSequencesThanTheQueueHoldsIs400) {
  // n beyond the queue (64): no retry could run it, so not a retryable 429.
  HttpReply reply = Post(port(), "/v1/completions", Greedy({{"prompt", "x"}, {"n", 128}}, 200));
  ExpectError(reply, 400, "n", "128 sequences");
  ExpectError(Post(port(), "/v1/completions", Greedy({{"prompt", {"a", "b", "c"}}, {"n", 22}}, 2)), 400, "n",
              "66 sequences (22 for each of 3 prompts)");
  EXPECT_TRUE(Eventually([&] { return KvWhole(); }, std::chrono::seconds(10)));
  // The engine's statistics are a snapshot of its last loop, so KvWhole can
  // hold while the cancelled requests still fill its queue: the next test's
  // request would be refused. Until one is accepted again:
  EXPECT_TRUE(Eventually(
      [&] { return Post(port(), "/v1/completions", Greedy({{"prompt", "x"}}, 1)).status == 200; },
      std::chrono::seconds(10)));
}

// Sends a streaming request on a raw socket, reads the first bytes, and
// closes: the engine must cancel the request and free its KV.
void ConnectReadClose(int port, bool stream) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  const std::string body = Greedy({{"prompt", "The quick brown fox"}, {"stream", stream}}, 500).dump();
  const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  asio::write(socket, asio::buffer(request));
  if (stream) {
    // Until the first token's event: the request is running in the engine.
    std::string seen;
    char buffer[512];
    boost::system::error_code ec;
    while (seen.find("data: ") == std::string::npos && !ec) {
      seen.append(buffer, socket.read_some(asio::buffer(buffer), ec));
      // A refusal is a whole reply on a kept-alive connection: waiting for
      // an event would wait for the idle timeout.
      if (seen.find("\r\n") != std::string::npos && !seen.starts_with("HTTP/1.1 200")) {
        ADD_FAILURE() << "not a stream: " << seen;
        break;
      }
    }
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  socket.close();
}

// Sends raw bytes and reads until the server closes (or 5 s pass).
std::string RawExchange(int port, const std::string& bytes) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  asio::write(socket, asio::buffer(bytes));
  timeval timeout{5, 0};
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string reply;
  char buffer[4096];
  boost::system::error_code ec;
  while (!ec) reply.append(buffer, socket.read_some(asio::buffer(buffer), ec));
  return reply;
}

// Requests the HTTP parser refuses get a reply that says why, then the
// connection closes; the server serves on.
TEST_F(OpenAiHttpTest, MalformedHttpGetsAReply) {
  EXPECT_TRUE(RawExchange(port(), "GARBAGE\r\n\r\n").starts_with("HTTP/1.1 400")) << "garbage request line";
  const std::string negative = RawExchange(port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n");
  EXPECT_TRUE(negative.starts_with("HTTP/1.1 400")) << negative;
  EXPECT_NE(negative.find("malformed HTTP request"), std::string::npos) << negative;
  const std::string big = RawExchange(port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Big: " +
                                                  std::string(100 * 1024, 'a') + "\r\n\r\n");
  EXPECT_TRUE(big.starts_with("HTTP/1.1 431")) << big.substr(0, 200);
  EXPECT_EQ(Post(port(), "/v1/completions", Greedy({{"prompt", "x"}}, 2)).status, 200);
}

TEST_F(OpenAiHttpTest, DisconnectCancelsAndFreesKv) {
  ConnectReadClose(port(), /*stream=*/true);
  EXPECT_TRUE(Eventually([&] { return KvWhole(); }, std::chrono::seconds(10)));
  ConnectReadClose(port(), /*stream=*/false);
  EXPECT_TRUE(Eventually([&] { return KvWhole(); }, std::chrono::seconds(10)));
}

// The load check of the brief: 200 rapid connect-cancel cycles.
TEST_F(OpenAiHttpTest, RapidConnectCancelCyclesLeaveKvWhole) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) ConnectReadClose(port(), /*stream=*/i % 2 == 0);
  EXPECT_TRUE(Eventually([&] { return KvWhole(); }, std::chrono::seconds(20)));
  const EngineStats s = server_->engine()->Stats();
  std::printf("connect-cancel: 200 cycles in %.1f s; kv_free_blocks %d / %d\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              s.kv_free_blocks, s.kv_total_blocks);
  EXPECT_EQ(HttpCall(port(), "GET", "/health").status, 200);
}

TEST(OpenAiHttpAuthTest, KeysLimitsAndLoading) {
  ServerOptions options = HttpOptions();
  options.ops.api_keys = {"secret-1"};
  options.ops.max_message_bytes = 1 << 20;
  absl::StatusOr<std::unique_ptr<GemmaServer>> started = GemmaServer::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  GemmaServer& server = **started;
  const int port = server.http_port();
  // Before Load: loading.
  EXPECT_EQ(HttpCall(port, "GET", "/health").status, 503);
  ExpectError(HttpCall(port, "GET", "/v1/models", "", {{"Authorization", "Bearer secret-1"}}), 503, "");
  ASSERT_TRUE(server.Load().ok());
  EXPECT_EQ(HttpCall(port, "GET", "/health").status, 200);
  ExpectError(HttpCall(port, "GET", "/v1/models"), 401, "");
  ExpectError(HttpCall(port, "GET", "/v1/models", "", {{"Authorization", "Bearer wrong"}}), 401, "");
  EXPECT_EQ(HttpCall(port, "GET", "/v1/models", "", {{"Authorization", "bearer secret-1"}}).status, 200);
  const std::string big = Json{{"prompt", std::string(2 << 20, 'a')}}.dump();
  ExpectError(HttpCall(port, "POST", "/v1/completions", big, {{"Authorization", "Bearer secret-1"}}), 413, "");
  server.Drain(std::chrono::milliseconds(0));
}

TEST(OpenAiHttpDrainTest, DrainingRefusesNewRequestsAndFinishesStreams) {
  std::unique_ptr<GemmaServer> server = StartTestServer(HttpOptions());
  ASSERT_NE(server, nullptr);
  const int port = server->http_port();
  HttpReply streamed;
  std::thread stream([&] {
    streamed = Post(port, "/v1/completions",
                    Greedy({{"prompt", "The quick brown fox"}, {"stream", true}}, 300));
  });
  ASSERT_TRUE(Eventually([&] { return server->engine()->Stats().running == 1; },
                         std::chrono::seconds(10)));
  std::thread drain([&] { server->Drain(std::chrono::seconds(60)); });
  EXPECT_TRUE(Eventually([&] { return HttpCall(port, "GET", "/health").status == 503; },
                         std::chrono::seconds(5)));
  ExpectError(Post(port, "/v1/completions", {{"prompt", "x"}}), 503, "", "shutting down");
  stream.join();
  drain.join();
  bool done = false;
  std::vector<Json> events = SseEvents(streamed.body, &done);
  EXPECT_TRUE(done);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length");
}

}  // namespace
}  // namespace gemma::server::testing
