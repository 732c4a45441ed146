// Every invalid input gets INVALID_ARGUMENT naming the field (and the value),
// and the server keeps serving afterwards.
#include <functional>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

struct InvalidCase {
  std::string name;
  std::function<void(v1::GenerateRequest&)> mutate;
  std::string field;       // must appear in the message
  std::string value = "";  // must appear in the message when not empty
};

v1::GenerateRequest ValidRequest() { return GreedyText("The quick brown fox", 8); }

// A chat of one user message, "hi".
void AskHi(v1::GenerateRequest& r) {
  auto* m = r.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("hi");
}

// `depth` arrays inside one another: "[[...]]".
std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::vector<InvalidCase> InvalidCases() {
  using R = v1::GenerateRequest;
  return {
      {"no_prompt", [](R& r) { r.clear_prompt(); }, "prompt"},
      {"empty_text", [](R& r) { r.set_text(""); }, "text"},
      {"empty_ids", [](R& r) { r.mutable_tokens(); }, "tokens.ids"},
      {"empty_chat", [](R& r) { r.mutable_chat(); }, "chat.messages"},
      {"past_context", [](R& r) { r.mutable_stopping()->set_max_tokens(1020); },
       "stopping.max_tokens", "1020"},
      {"prompt_fills_context",
       [](R& r) { r.mutable_tokens()->mutable_ids()->Resize(1024, 5); }, "prompt", "1024"},
      {"id_past_vocab",
       [](R& r) {
         r.mutable_tokens()->add_ids(2);
         r.mutable_tokens()->add_ids(1024);
       },
       "tokens.ids[1]", "1024"},
      {"negative_id", [](R& r) { r.mutable_tokens()->add_ids(-3); },
       "tokens.ids[0]", "-3"},
      {"invalid_utf8_text", [](R& r) { r.set_text("ab\xff\xfe"); }, "text", "UTF-8"},
      {"overlong_utf8_text", [](R& r) { r.set_text("\xc0\xaf"); }, "text", "UTF-8"},
      {"invalid_utf8_chat",
       [](R& r) {
         auto* m = r.mutable_chat()->add_messages();
         m->set_role("user");
         m->set_content("\xed\xa0\x80");  // a UTF-16 surrogate
       },
       "chat.messages[0].content", "UTF-8"},
      {"invalid_utf8_stop", [](R& r) { r.mutable_stopping()->add_stop("\x80"); },
       "stopping.stop[0]", "UTF-8"},
      {"negative_temperature", [](R& r) { r.mutable_sampling()->set_temperature(-0.5f); },
       "sampling.temperature", "-0.5"},
      {"top_p_zero", [](R& r) { r.mutable_sampling()->set_top_p(0.0f); }, "sampling.top_p", "0"},
      {"top_p_above_one", [](R& r) { r.mutable_sampling()->set_top_p(1.5f); },
       "sampling.top_p", "1.5"},
      {"negative_top_k", [](R& r) { r.mutable_sampling()->set_top_k(-1); },
       "sampling.top_k", "-1"},
      {"negative_min_p", [](R& r) { r.mutable_sampling()->set_min_p(-0.1f); },
       "sampling.min_p", "-0.1"},
      {"min_p_above_one", [](R& r) { r.mutable_sampling()->set_min_p(1.5f); },
       "sampling.min_p", "1.5"},
      {"zero_repetition_penalty",
       [](R& r) { r.mutable_sampling()->set_repetition_penalty(0.0f); },
       "repetition_penalty"},
      {"zero_max_tokens", [](R& r) { r.mutable_stopping()->set_max_tokens(0); },
       "stopping.max_tokens", "0"},
      {"negative_max_tokens", [](R& r) { r.mutable_stopping()->set_max_tokens(-4); },
       "stopping.max_tokens", "-4"},
      {"min_tokens_above_max", [](R& r) { r.mutable_stopping()->set_min_tokens(9); },
       "stopping.min_tokens", "9"},
      {"too_many_stops",
       [](R& r) {
         for (int i = 0; i < 17; ++i) r.mutable_stopping()->add_stop(absl::StrCat("s", i));
       },
       "stopping.stop", "17"},
      {"long_stop", [](R& r) { r.mutable_stopping()->add_stop(std::string(257, 'x')); },
       "stopping.stop[0]", "257"},
      {"empty_stop", [](R& r) { r.mutable_stopping()->add_stop(""); }, "stopping.stop[0]"},
      {"stop_id_past_vocab", [](R& r) { r.mutable_stopping()->add_stop_token_ids(5000); },
       "stopping.stop_token_ids[0]", "5000"},
      {"logprobs_above_20", [](R& r) { r.set_logprobs(21); }, "logprobs", "21"},
      {"negative_logprobs", [](R& r) { r.set_logprobs(-1); }, "logprobs", "-1"},
      {"unknown_role",
       [](R& r) {
         auto* m = r.mutable_chat()->add_messages();
         m->set_role("robot");
         m->set_content("beep");
       },
       "chat.messages[0].role", "robot"},
      {"long_request_id", [](R& r) { r.set_request_id(std::string(200, 'i')); },
       "request_id", "200"},
      {"request_id_with_a_newline", [](R& r) { r.set_request_id("a\nINFO forged"); }, "request_id",
       "control character 10 at byte 1"},
      // JSON nested 20 000 levels deep (40 KB): refused before anything walks it recursively.
      {"deep_tools",
       [](R& r) {
         AskHi(r);
         r.mutable_chat()->set_tools(
             absl::StrCat(R"([{"type":"function","function":{"name":"f","parameters":{"x":)", Nested(20000), "}}}]"));
       },
       "chat.tools", "deeper than 128 levels (at [0].function.parameters.x[0]"},
      {"tool_parameters_properties_not_an_object",
       [](R& r) {
         AskHi(r);
         r.mutable_chat()->set_tools(
             R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":5}}}])");
       },
       "chat.tools[0].function.parameters.properties"},
      {"tool_type_not_function",
       [](R& r) {
         AskHi(r);
         r.mutable_chat()->set_tools(R"([{"type":"retrieval","function":{"name":"f"}}])");
       },
       "chat.tools[0].type", "retrieval"},
      {"deep_template_kwargs",
       [](R& r) {
         AskHi(r);
         r.mutable_chat()->set_template_kwargs(absl::StrCat(R"({"k":)", Nested(20000), "}"));
       },
       "chat.template_kwargs", "deeper than 128"},
      {"deep_tool_call_arguments",
       [](R& r) {
         AskHi(r);
         auto* a = r.mutable_chat()->add_messages();
         a->set_role("assistant");
         auto* call = a->add_tool_calls();
         call->set_name("f");
         call->set_arguments(absl::StrCat(R"({"a":)", Nested(20000), "}"));
       },
       "chat.messages[1].tool_calls[0].arguments", "deeper than 128"},
  };
}

class ValidationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartTestServer().release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static GemmaServer* server_;
};
GemmaServer* ValidationTest::server_ = nullptr;

TEST_F(ValidationTest, EveryInvalidInputNamesItsField) {
  ASSERT_NE(server_, nullptr);
  auto stub = NewStub(server_->address());
  for (const InvalidCase& c : InvalidCases()) {
    SCOPED_TRACE(c.name);
    v1::GenerateRequest request = ValidRequest();
    c.mutate(request);
    StreamResult result = RunStream(*stub, request, std::chrono::seconds(10));
    EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << result.status.error_message();
    EXPECT_EQ(result.num_messages, 0);
    EXPECT_NE(result.status.error_message().find(c.field), std::string::npos)
        << result.status.error_message();
    if (!c.value.empty()) {
      EXPECT_NE(result.status.error_message().find(c.value), std::string::npos)
          << result.status.error_message();
    }
  }
  // Still serving, with every slot free.
  StreamResult ok = RunStream(*stub, ValidRequest());
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.ids.size(), 8u);
  // The engine publishes its stats after the step that sent the last event.
  EXPECT_TRUE(Eventually(
      [&] {
        const EngineStats stats = server_->engine()->Stats();
        return stats.free_slots == stats.total_slots;
      },
      std::chrono::seconds(2)));
}

TEST_F(ValidationTest, UnaryCallsValidateToo) {
  ASSERT_NE(server_, nullptr);
  auto stub = NewStub(server_->address());
  v1::DetokenizeRequest detokenize;
  detokenize.add_ids(7);
  detokenize.add_ids(99999);
  v1::DetokenizeResponse text;
  grpc::ClientContext c1;
  grpc::Status status = stub->Detokenize(&c1, detokenize, &text);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("ids[1]"), std::string::npos) << status.error_message();

  v1::TokenizeRequest tokenize;
  tokenize.set_text("\xff");
  v1::TokenizeResponse ids;
  grpc::ClientContext c2;
  status = stub->Tokenize(&c2, tokenize, &ids);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("text"), std::string::npos) << status.error_message();

  grpc::ClientContext c3;
  status = stub->Tokenize(&c3, v1::TokenizeRequest(), &ids);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ValidationTest, FullQueueAnswersResourceExhaustedAtOnce) {
  ServerOptions options = TestServerOptions();
  options.backend.max_slots = 1;
  options.max_queue = 1;
  std::unique_ptr<GemmaServer> small = StartTestServer(options);
  ASSERT_NE(small, nullptr);
  auto stub = NewStub(small->address());
  // One running, one waiting: the queue is full.
  grpc::ClientContext running_ctx, waiting_ctx;
  auto running = stub->Generate(&running_ctx, GreedyText("The quick brown fox", 1000));
  v1::GenerateResponse first;
  ASSERT_TRUE(running->Read(&first));
  // The engine counts the queue as of its last published step: let it
  // publish the first request as running before queueing the second.
  ASSERT_TRUE(Eventually([&] { return small->engine()->Stats().running == 1; },
                         std::chrono::seconds(5)));
  auto waiting = stub->Generate(&waiting_ctx, GreedyText("It is a truth", 8));
  ASSERT_TRUE(Eventually([&] { return small->engine()->Stats().waiting == 1; },
                         std::chrono::seconds(5)))
      << "running " << small->engine()->Stats().running << " waiting "
      << small->engine()->Stats().waiting;
  const auto start = std::chrono::steady_clock::now();
  StreamResult refused = RunStream(*stub, GreedyText("Q:", 8), std::chrono::seconds(10));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.status.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  running_ctx.TryCancel();
  while (running->Read(&first)) {}
  running->Finish();
  while (waiting->Read(&first)) {}
  EXPECT_TRUE(waiting->Finish().ok());
}

}  // namespace
}  // namespace gemma::server::testing
