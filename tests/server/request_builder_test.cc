// Unit tests of proto -> engine request conversion (no server needed).
#include "server/request_builder.h"

#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "server/status_mapping.h"

namespace gemma::server {
namespace {

const std::string kTokenizerPath = std::string(GEMMA_MODELS_DIR) + "/gemma4-fortunes/tokenizer.model";

TEST(Utf8Test, AcceptsValidAndRejectsMalformed) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\xc3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf"));      // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("a\x80z"));            // stray continuation
}

TEST(StatusMappingTest, KeepsCodeAndMessage) {
  grpc::Status s = ToGrpcStatus(absl::InvalidArgumentError("top_p must be in (0, 1], got 1.5"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "top_p must be in (0, 1], got 1.5");
  EXPECT_EQ(ToGrpcStatus(absl::ResourceExhaustedError("full")).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(ToGrpcStatus(absl::UnavailableError("x")).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

class RequestBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = Tokenizer::Load(kTokenizerPath);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = *std::move(loaded);
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  ServingLimits limits_{/*max_context=*/512, /*vocab_size=*/1024};
};

TEST_F(RequestBuilderTest, ChatStopsAtTurnEndAndTextDoesNot) {
  v1::GenerateRequest request;
  auto* m = request.mutable_chat()->add_messages();
  m->set_role("assistant");
  m->set_content("hi");
  auto built = BuildGenerationRequest(request, "id", *tokenizer_, limits_);
  ASSERT_TRUE(built.ok()) << built.status();
  const int32_t turn_end = tokenizer_->special().turn_end;
  ASSERT_GE(turn_end, 0);
  EXPECT_EQ(built->stopping.stop_token_ids, std::vector<int32_t>{turn_end});

  request.set_text("hi");
  built = BuildGenerationRequest(request, "id", *tokenizer_, limits_);
  ASSERT_TRUE(built.ok());
  EXPECT_TRUE(built->stopping.stop_token_ids.empty());
  EXPECT_EQ(built->prompt_ids.front(), tokenizer_->special().bos);
}

TEST_F(RequestBuilderTest, DefaultsWhenUnset) {
  v1::GenerateRequest request;
  request.set_text("hello");
  auto built = BuildGenerationRequest(request, "id", *tokenizer_, limits_);
  ASSERT_TRUE(built.ok());
  EXPECT_EQ(built->request_id, "id");
  EXPECT_EQ(built->sampling.temperature, 1.0f);
  EXPECT_EQ(built->sampling.top_p, 1.0f);
  EXPECT_EQ(built->sampling.repetition_penalty, 1.0f);
  EXPECT_FALSE(built->sampling.seed.has_value());
  EXPECT_EQ(built->sampling.num_logprobs, -1);
  // Unset max_tokens stays unset: the engine's token budget resolves it.
  EXPECT_FALSE(built->stopping.max_tokens.has_value());

  request.mutable_sampling()->set_temperature(0.0f);
  request.mutable_sampling()->set_seed(0);
  request.set_logprobs(0);
  built = BuildGenerationRequest(request, "id", *tokenizer_, limits_);
  ASSERT_TRUE(built.ok());
  EXPECT_TRUE(built->sampling.greedy());
  EXPECT_EQ(built->sampling.seed, std::optional<uint64_t>(0));
  EXPECT_EQ(built->sampling.num_logprobs, 0);
}

// Conversion only: values the engine judges pass through unchanged (its
// admission names them by the same proto paths).
TEST_F(RequestBuilderTest, MeaningIsLeftToTheEngine) {
  v1::GenerateRequest request;
  request.mutable_tokens()->add_ids(5000);  // past limits_.vocab_size
  request.mutable_stopping()->set_max_tokens(0);
  request.mutable_stopping()->add_stop_token_ids(-2);
  request.mutable_sampling()->set_top_p(1.5f);
  auto built = BuildGenerationRequest(request, "id", *tokenizer_, limits_);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->prompt_ids, std::vector<int32_t>{5000});
  EXPECT_EQ(built->stopping.max_tokens, std::optional<int>(0));
  EXPECT_EQ(built->stopping.stop_token_ids, std::vector<int32_t>{-2});
  EXPECT_EQ(built->sampling.top_p, 1.5f);
  // What the engine's types cannot carry is refused here.
  request.mutable_stopping()->add_stop("\xff");
  built = BuildGenerationRequest(request, "id", *tokenizer_, limits_);
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(built.status().message().find("stopping.stop[0]"), std::string::npos) << built.status();
}

TEST_F(RequestBuilderTest, TokenPromptsAreUsedAsGiven) {
  v1::GenerateRequest request;
  request.mutable_tokens()->add_ids(7);
  request.mutable_tokens()->add_ids(8);
  auto built = BuildGenerationRequest(request, "id", *tokenizer_, limits_);
  ASSERT_TRUE(built.ok());
  EXPECT_EQ(built->prompt_ids, (std::vector<int32_t>{7, 8}));
}

}  // namespace
}  // namespace gemma::server
