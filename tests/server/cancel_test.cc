// A client that cancels, or whose deadline passes, has its sequence stopped
// and its slot (KV) freed promptly; the server goes on serving.
#include "gtest/gtest.h"
#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

class CancelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartTestServer();
    ASSERT_NE(server_, nullptr);
    stub_ = NewStub(server_->address());
  }
  bool AllSlotsFree() const {
    const EngineStats stats = server_->engine()->Stats();
    return stats.free_slots == stats.total_slots && stats.running == 0 && stats.waiting == 0;
  }
  std::unique_ptr<GemmaServer> server_;
  std::unique_ptr<v1::Gemma::Stub> stub_;
};

TEST_F(CancelTest, ClientCancelFreesTheSlot) {
  grpc::ClientContext context;
  auto reader = stub_->Generate(&context, GreedyText("The quick brown fox", 1000));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  // Stats are published after each step, so the slot shows as taken soon.
  EXPECT_TRUE(Eventually([&] { return server_->engine()->Stats().running == 1; },
                         std::chrono::seconds(2)));
  context.TryCancel();
  int tokens = response.token_ids_size();
  while (reader->Read(&response)) tokens += response.token_ids_size();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(tokens, 1000);
  EXPECT_TRUE(Eventually([&] { return AllSlotsFree(); }, std::chrono::seconds(2)));
  StreamResult after = RunStream(*stub_, GreedyText("The quick brown fox", 5));
  EXPECT_TRUE(after.status.ok());
}

TEST_F(CancelTest, DeadlineFreesTheSlot) {
  StreamResult result =
      RunStream(*stub_, GreedyText("The quick brown fox", 1000), std::chrono::milliseconds(300));
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(result.ids.size(), 1000u);
  EXPECT_TRUE(Eventually([&] { return AllSlotsFree(); }, std::chrono::seconds(2)));
}

TEST_F(CancelTest, ManyCancelledStreamsAllFreeTheirSlots) {
  constexpr int kStreams = 8;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>>> readers;
  for (int i = 0; i < kStreams; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(stub_->Generate(contexts.back().get(), GreedyText("Fortune", 1000)));
  }
  v1::GenerateResponse response;
  for (auto& reader : readers) ASSERT_TRUE(reader->Read(&response));
  for (auto& context : contexts) context->TryCancel();
  for (auto& reader : readers) {
    while (reader->Read(&response)) {}
    reader->Finish();
  }
  EXPECT_TRUE(Eventually([&] { return AllSlotsFree(); }, std::chrono::seconds(2)));
}

}  // namespace
}  // namespace gemma::server::testing
