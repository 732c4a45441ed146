// Prompts are tokenized on the PreparePool, off the gRPC threads: huge
// prompts being prepared leave short calls served at once, a call cancelled
// while queued is never built or submitted, and a full queue answers
// RESOURCE_EXHAUSTED naming it. Real gRPC over loopback, fortunes model.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "server/prepare_pool.h"
#include "tests/server/http_test_client.h"
#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Resident memory of this process (the in-process server's), in MB.
double ResidentMb() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1e6;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A chat of `bytes` of text. Chat prompts have no byte bound (a template may
// rewrite its input), so it is rendered and encoded, then refused by its
// token count (INVALID_ARGUMENT). The default takes ~1.5 s to encode on an
// idle core of the 2-core CI machine (the tests below need their huge
// prompts to outlast 1.5 s in all: two encodings of 1.5 MB took 1.41-1.44 s
// there); it stays under the 4 MB message and body limits. A text prompt
// this size would be refused by its length in bytes before encoding.
constexpr size_t kHugeBytes = 2560 << 10;

std::string HugeText(size_t bytes = kHugeBytes) {
  std::string text;
  while (text.size() < bytes) text += "fortune cookie ";
  return text;
}

v1::GenerateRequest HugeChat(int max_tokens = 1) {
  std::string text = HugeText();
  v1::GenerateRequest request;
  v1::ChatMessage* message = request.mutable_chat()->add_messages();
  message->set_role("user");
  message->set_content(std::move(text));
  request.mutable_stopping()->set_max_tokens(max_tokens);
  return request;
}

TEST(PreparePoolUnitTest, RunsSmallInputsInlineAndBoundsTheQueue) {
  PreparePool pool({.num_threads = 1, .max_queued = 1, .inline_below_bytes = 100});
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  ASSERT_TRUE(pool.Post(10, [&](bool run) { if (run) ran_on = std::this_thread::get_id(); }).ok());
  EXPECT_EQ(ran_on, caller);
  std::atomic<bool> release{false};
  std::atomic<int> started{0};
  auto hold = [&](bool) {
    ++started;
    while (!release) std::this_thread::yield();
  };
  ASSERT_TRUE(pool.Post(1000, hold).ok());
  while (started == 0) std::this_thread::yield();
  std::atomic<int> cancelled{0};
  ASSERT_TRUE(pool.Post(1000, [&](bool run) { cancelled += run ? 0 : 1; }).ok());
  absl::Status full = pool.Post(1000, [](bool) { ADD_FAILURE() << "a refused task ran"; });
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("queue is full"), std::string::npos) << full;
  pool.CancelQueued();
  EXPECT_EQ(cancelled, 1);
  release = true;
}

TEST(PreparePoolServerTest, HugePromptsLeaveShortCallsServed) {
  ServerOptions options = TestServerOptions();
  std::unique_ptr<GemmaServer> server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  const v1::GenerateRequest huge = HugeChat();
  const double resident_before = ResidentMb();
  constexpr int kBig = 4;
  std::atomic<int> big_done{0};
  std::vector<double> big_s(kBig);
  std::vector<std::thread> big;
  const auto start = Clock::now();
  for (int i = 0; i < kBig; ++i) {
    big.emplace_back([&, i] {
      StreamResult result = RunStream(*NewStub(server->address()), huge);
      EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << result.status.error_message();
      big_s[i] = SecondsSince(start);
      ++big_done;
    });
  }
  auto stub = NewStub(server->address());
  auto model_info = [&] {
    grpc::ClientContext context;
    v1::ModelInfo info;
    EXPECT_TRUE(stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  };
  model_info();  // the channel is connected before the clock starts
  // Until the server is encoding.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto info_start = Clock::now();
  model_info();
  const double info_s = SecondsSince(info_start);
  const auto small_start = Clock::now();
  StreamResult small = RunStream(*stub, GreedyText("Hello", 4));
  const double small_s = SecondsSince(small_start);
  const int done_by_then = big_done.load();
  EXPECT_TRUE(small.status.ok()) << small.status.error_message();
  EXPECT_EQ(small.ids.size(), 4u);
  for (std::thread& t : big) t.join();
  const double slowest = *std::max_element(big_s.begin(), big_s.end());
  std::printf("beside %d huge prompts (%.1f MB, all done after %.2f s): GetModelInfo %.3f s, "
              "4-token Generate %.3f s\n",
              kBig, huge.ByteSizeLong() / 1e6, slowest, info_s, small_s);
  // The huge prompts took seconds; the short calls waited for none of them.
  ASSERT_GT(slowest, 1.5) << "the huge prompts were too quick for this test to tell";
  EXPECT_LT(done_by_then, kBig);
  EXPECT_LT(info_s, 0.5);
  EXPECT_LT(small_s, std::max(1.0, slowest / 3));
  EXPECT_TRUE(Eventually([&] { return server->active_calls() == 0; }, std::chrono::seconds(5)));
  // Encoding's transient memory went back to the system (malloc_trim).
  const double resident_after = ResidentMb();
  std::printf("resident: %.0f MB before the huge prompts, %.0f MB after\n", resident_before,
              resident_after);
}

TEST(PreparePoolServerTest, CancelledWhileQueuedIsNeverSubmitted) {
  ServerOptions options = TestServerOptions();
  options.prepare = {.num_threads = 1, .max_queued = 8, .inline_below_bytes = 0};
  std::unique_ptr<GemmaServer> server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  // One huge prompt holds the only worker.
  std::thread big([&] { RunStream(*NewStub(server->address()), HugeChat()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const EngineStats before = server->engine()->Stats();
  // Queued behind it, then cancelled.
  auto stub = NewStub(server->address());
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>>> readers;
  for (int i = 0; i < 3; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(stub->Generate(contexts.back().get(),
                                     GreedyText("Queued and cancelled " + std::to_string(i), 500)));
  }
  EXPECT_TRUE(Eventually([&] { return server->active_calls() >= 4; }, std::chrono::seconds(5)));
  for (auto& context : contexts) context->TryCancel();
  for (auto& reader : readers) {
    v1::GenerateResponse response;
    while (reader->Read(&response)) {}
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  big.join();
  // No id left, no KV held, and no prompt token of the cancelled calls computed.
  EXPECT_TRUE(Eventually([&] { return server->active_calls() == 0; }, std::chrono::seconds(5)));
  const EngineStats after = server->engine()->Stats();
  EXPECT_EQ(after.kv_free_blocks, after.kv_total_blocks);
  EXPECT_EQ(after.free_slots, after.total_slots);
  EXPECT_EQ(after.prompt_tokens, before.prompt_tokens);
  // The server goes on serving.
  EXPECT_TRUE(RunStream(*stub, GreedyText("Hello", 2)).status.ok());
}

TEST(PreparePoolServerTest, FullQueueIsResourceExhausted) {
  ServerOptions options = TestServerOptions();
  options.prepare = {.num_threads = 1, .max_queued = 1};
  std::unique_ptr<GemmaServer> server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  const v1::GenerateRequest huge = HugeChat();
  constexpr int kCalls = 5;
  std::vector<grpc::Status> statuses(kCalls);
  std::vector<std::thread> calls;
  for (int i = 0; i < kCalls; ++i) {
    calls.emplace_back([&, i] {
      statuses[i] = RunStream(*NewStub(server->address()), huge).status;
    });
  }
  for (std::thread& t : calls) t.join();
  int exhausted = 0;
  for (const grpc::Status& status : statuses) {
    if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
      continue;
    }
    ++exhausted;
    EXPECT_NE(status.error_message().find("preparation queue is full (1 requests"),
              std::string::npos) << status.error_message();
  }
  // One encodes, one waits: of five sent within milliseconds, some are refused.
  EXPECT_GE(exhausted, 1);
  EXPECT_LE(exhausted, kCalls - 2);
  // Tokenize shares the queue and its bound; small inputs still go through.
  v1::TokenizeRequest tokenize;
  tokenize.set_text("hello");
  grpc::ClientContext context;
  v1::TokenizeResponse tokens;
  EXPECT_TRUE(NewStub(server->address())->Tokenize(&context, tokenize, &tokens).ok());
  EXPECT_GT(tokens.ids_size(), 0);
  EXPECT_TRUE(Eventually([&] { return server->active_calls() == 0; }, std::chrono::seconds(5)));
}

// The HTTP front prepares on the same pool: huge chats being encoded leave
// other connections answered, and a full queue is 429 naming it.
TEST(PreparePoolServerTest, HttpHugeChatsLeaveOtherRequestsServed) {
  ServerOptions options = TestServerOptions();
  options.http_port = 0;
  options.prepare = {.num_threads = 1, .max_queued = 1};
  std::unique_ptr<GemmaServer> server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  const int port = server->http_port();
  const nlohmann::json huge = {{"messages", {{{"role", "user"}, {"content", HugeText()}}}},
                               {"max_tokens", 1}};
  constexpr int kCalls = 4;
  std::vector<HttpReply> replies(kCalls);
  std::vector<std::thread> calls;
  const auto start = Clock::now();
  for (int i = 0; i < kCalls; ++i) {
    calls.emplace_back([&, i] { replies[i] = Post(port, "/v1/chat/completions", huge); });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto models_start = Clock::now();
  EXPECT_EQ(HttpCall(port, "GET", "/v1/models").status, 200);
  const double models_s = SecondsSince(models_start);
  const auto small_start = Clock::now();
  HttpReply small = Post(port, "/v1/completions",
                         {{"prompt", "Hello"}, {"max_tokens", 4}, {"temperature", 0}});
  const double small_s = SecondsSince(small_start);
  for (std::thread& t : calls) t.join();
  const double all_s = SecondsSince(start);
  std::printf("HTTP beside %d huge chats (done after %.2f s): /v1/models %.3f s, 4-token "
              "completion %.3f s\n", kCalls, all_s, models_s, small_s);
  EXPECT_EQ(small.status, 200) << small.body;
  ASSERT_GT(all_s, 1.5) << "the huge chats were too quick for this test to tell";
  EXPECT_LT(models_s, 0.5);
  EXPECT_LT(small_s, std::max(1.0, all_s / 3));
  int exhausted = 0;
  for (const HttpReply& reply : replies) {
    if (reply.status == 429) {
      ++exhausted;
      EXPECT_NE(reply.body.find("preparation queue is full"), std::string::npos) << reply.body;
    } else {
      EXPECT_EQ(reply.status, 400) << reply.body.substr(0, 300);  // too many tokens
    }
  }
  EXPECT_GE(exhausted, 1);
  EXPECT_TRUE(Eventually([&] { return server->active_calls() == 0; }, std::chrono::seconds(5)));
}

}  // namespace
}  // namespace gemma::server::testing
