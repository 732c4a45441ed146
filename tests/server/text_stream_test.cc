// What a client reads from Generate is exact: over hundreds of seeded
// requests (text, token-id and chat prompts, sampled), the prompt's text plus
// every streamed delta equals the decode of prompt + output ids, with and
// without special tokens; generation_config.json's defaults; a model
// directory with tokenizer.json and no tokenizer.model.
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "gtest/gtest.h"
#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

namespace fs = std::filesystem;

class TextStreamTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartTestServer().release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }
  static GemmaServer* server_;
};
GemmaServer* TextStreamTest::server_ = nullptr;

// Words from the fortunes' world plus whitespace, punctuation and multi-byte
// characters (byte-fallback pieces in this 1,024-piece vocabulary).
std::string RandomText(std::mt19937& rng) {
  static const char* kWords[] = {"love", "The", " fortune", "will", "you", "  ", "\n", "\t",
                                 "é", "日本", "🙂", "—", "is", "a", "truth", ",", "?", "Q:",
                                 "wise", "man", " ", "ñ", "über", "cat"};
  std::uniform_int_distribution<int> count(1, 12);
  std::uniform_int_distribution<size_t> pick(0, std::size(kWords) - 1);
  std::string text;
  for (int n = count(rng); n > 0; --n) {
    if (!text.empty() && rng() % 2) text += ' ';
    text += kWords[pick(rng)];
  }
  return text;
}

struct Case {
  v1::GenerateRequest request;
  bool skip_special = true;
};

Case MakeCase(int index, const Tokenizer& tokenizer) {
  std::mt19937 rng(1000 + index);
  Case c;
  v1::GenerateRequest& r = c.request;
  switch (index % 3) {
    case 0: r.set_text(RandomText(rng)); break;
    case 1: {
      // Any ids, control and byte pieces included: BOS, then random ones.
      r.mutable_tokens()->add_ids(tokenizer.special().bos);
      std::uniform_int_distribution<int> id(0, tokenizer.vocab_size() - 1);
      for (int n = 1 + rng() % 12; n > 0; --n) r.mutable_tokens()->add_ids(id(rng));
      break;
    }
    default: {
      v1::ChatMessage* m = r.mutable_chat()->add_messages();
      m->set_role("user");
      m->set_content(RandomText(rng));
      r.set_parse_output(false);  // the raw text, so that it can be compared with Decode
      break;
    }
  }
  c.skip_special = index % 4 != 1;
  if (!c.skip_special) r.set_skip_special_tokens(false);
  r.mutable_sampling()->set_temperature(index % 5 == 0 ? 0.0f : 1.0f);
  r.mutable_sampling()->set_seed(index);
  r.mutable_stopping()->set_max_tokens(1 + static_cast<int>(rng() % 24));
  r.mutable_stopping()->set_ignore_eos(true);
  return c;
}

// The prompt ids the server computed: Tokenize for text and chat.
std::vector<int32_t> PromptIds(v1::Gemma::Stub& stub, const v1::GenerateRequest& r) {
  if (r.has_tokens()) return {r.tokens().ids().begin(), r.tokens().ids().end()};
  v1::TokenizeRequest request;
  if (r.has_chat()) {
    *request.mutable_chat() = r.chat();
  } else {
    request.set_text(r.text());
    request.set_add_bos(true);
  }
  v1::TokenizeResponse response;
  grpc::ClientContext context;
  EXPECT_TRUE(stub.Tokenize(&context, request, &response).ok());
  return {response.ids().begin(), response.ids().end()};
}

TEST_F(TextStreamTest, PromptTextPlusDeltasEqualsDecodeOfEverything) {
  constexpr int kCases = 510;
  constexpr int kWorkers = 8;
  const Tokenizer& tokenizer = *server_->tokenizer();
  std::mutex mu;
  int num_with_special_output = 0;
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      auto stub = NewStub(server_->address());
      for (int i = w; i < kCases; i += kWorkers) {
        const Case c = MakeCase(i, tokenizer);
        const std::vector<int32_t> prompt = PromptIds(*stub, c.request);
        const StreamResult result = RunStream(*stub, c.request);
        std::lock_guard<std::mutex> lock(mu);
        SCOPED_TRACE("case " + std::to_string(i) + ": " + c.request.ShortDebugString());
        ASSERT_TRUE(result.status.ok()) << result.status.error_message();
        std::vector<int32_t> all = prompt;
        all.insert(all.end(), result.ids.begin(), result.ids.end());
        const std::string prompt_text = tokenizer.Decode(prompt, c.skip_special);
        EXPECT_EQ(prompt_text + result.text, tokenizer.Decode(all, c.skip_special));
        for (const std::string& delta : result.deltas) {
          EXPECT_EQ(utf8::FirstInvalidByte(delta), std::string_view::npos);
        }
        bool special_out = false;
        for (int32_t id : result.ids) special_out = special_out || tokenizer.IsControl(id);
        if (!c.skip_special && special_out) ++num_with_special_output;
      }
    });
  }
  for (std::thread& t : workers) t.join();
  // skip_special_tokens=false really returned control tokens in some text.
  EXPECT_GT(num_with_special_output, 0);
}

TEST_F(TextStreamTest, FirstDeltaKeepsItsLeadingSpace) {
  auto stub = NewStub(server_->address());
  const v1::GenerateRequest request = GreedyText("The quick brown fox", 8);
  const StreamResult result = RunStream(*stub, request);
  ASSERT_TRUE(result.status.ok());
  const Tokenizer& tokenizer = *server_->tokenizer();
  const std::string first = tokenizer.IdToPiece(result.ids.at(0));
  ASSERT_TRUE(first.starts_with("\xE2\x96\x81")) << "the golden continuation starts with a space";
  EXPECT_EQ(result.text.substr(0, 1), " ");
}

TEST_F(TextStreamTest, SkipSpecialTokensFalseKeepsControlTokensInText) {
  auto stub = NewStub(server_->address());
  const Tokenizer& tokenizer = *server_->tokenizer();
  // The prompt ends in "<eos>": the continuation is a fresh fortune, so the
  // model soon writes <eos> again (eos is ignored, so it stays in the stream).
  for (bool skip : {true, false}) {
    int found = 0;
    for (int seed = 0; seed < 40 && found == 0; ++seed) {
      v1::GenerateRequest request;
      request.set_text("You will be happy.");
      request.mutable_sampling()->set_seed(seed);
      request.mutable_stopping()->set_max_tokens(48);
      request.mutable_stopping()->set_ignore_eos(true);
      request.set_skip_special_tokens(skip);
      const StreamResult result = RunStream(*stub, request);
      ASSERT_TRUE(result.status.ok());
      for (int32_t id : result.ids) found += id == tokenizer.special().eos;
      if (found == 0) continue;
      const bool has_piece = result.text.find("<eos>") != std::string::npos;
      EXPECT_EQ(has_piece, !skip) << result.text;
    }
    EXPECT_GT(found, 0) << "no <eos> sampled in 40 tries";
  }
}

// A copy of the demo model directory (weights linked) with some files
// replaced or removed.
class ModelDirCopy {
 public:
  explicit ModelDirCopy(const std::string& name) {
    dir_ = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const auto& entry : fs::directory_iterator(kModelDir)) {
      fs::create_symlink(entry.path(), dir_ / entry.path().filename());
    }
  }
  ~ModelDirCopy() { fs::remove_all(dir_); }
  void Remove(const std::string& file) { fs::remove(dir_ / file); }
  void Write(const std::string& file, const std::string& text) {
    fs::remove(dir_ / file);
    std::ofstream(dir_ / file) << text;
  }
  void Link(const std::string& file, const std::string& target) {
    fs::remove(dir_ / file);
    fs::create_symlink(target, dir_ / file);
  }
  std::string path() const { return dir_.string(); }

 private:
  fs::path dir_;
};

v1::ModelInfo GetInfo(GemmaServer& server) {
  auto stub = NewStub(server.address());
  v1::ModelInfo info;
  grpc::ClientContext context;
  EXPECT_TRUE(stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  return info;
}

TEST(GenerationConfigTest, UnsetSamplingFieldsTakeTheModelsDefaults) {
  ModelDirCopy dir("gemma-genconfig");
  // temperature 0: a request that leaves it unset decodes greedily.
  dir.Write("generation_config.json",
            R"({"eos_token_id": [1, 6], "temperature": 0.0, "top_k": 7, "top_p": 0.5})");
  ServerOptions options = TestServerOptions();
  options.backend.model_dir = dir.path();
  auto server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  const v1::ModelInfo info = GetInfo(*server);
  EXPECT_EQ(info.default_temperature(), 0.0f);
  EXPECT_EQ(info.default_top_k(), 7);
  EXPECT_EQ(info.default_top_p(), 0.5f);
  EXPECT_NE(std::find(info.eos_token_ids().begin(), info.eos_token_ids().end(), 6),
            info.eos_token_ids().end());

  const GoldenPrompt golden = LoadGolden().at(0);
  v1::GenerateRequest request;
  request.set_text(golden.text);
  request.mutable_sampling()->set_seed(3);
  request.mutable_stopping()->set_max_tokens(static_cast<int>(TrustedPrefix(golden)));
  request.mutable_stopping()->set_ignore_eos(true);
  auto stub = NewStub(server->address());
  StreamResult greedy = RunStream(*stub, request);
  ASSERT_TRUE(greedy.status.ok());
  EXPECT_EQ(greedy.ids, std::vector<int32_t>(golden.greedy.begin(),
                                             golden.greedy.begin() + greedy.ids.size()));

  // --generation-config ignore: temperature 1, so the same seeded request samples.
  options.generation_config = "ignore";
  auto plain = StartTestServer(options);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(GetInfo(*plain).default_temperature(), 1.0f);
  EXPECT_EQ(GetInfo(*plain).default_top_k(), 0);
  auto plain_stub = NewStub(plain->address());
  StreamResult sampled = RunStream(*plain_stub, request);
  ASSERT_TRUE(sampled.status.ok());
  EXPECT_NE(sampled.ids, greedy.ids);
}

TEST(GenerationConfigTest, EosIdListEndsGeneration) {
  ModelDirCopy dir("gemma-geneos");
  const GoldenPrompt golden = LoadGolden().at(0);
  // The golden's third greedy token becomes an eos id of the model.
  const int32_t stop_id = golden.greedy.at(2);
  dir.Write("generation_config.json",
            "{\"eos_token_id\": [1, " + std::to_string(stop_id) + "]}");
  ServerOptions options = TestServerOptions();
  options.backend.model_dir = dir.path();
  auto server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server->address());
  v1::GenerateRequest request = GreedyText(golden.text, 16);
  request.mutable_stopping()->set_ignore_eos(false);
  StreamResult result = RunStream(*stub, request);
  ASSERT_TRUE(result.status.ok());
  ASSERT_EQ(result.ids.size(), 3u);
  EXPECT_EQ(result.finish.reason(), v1::FINISH_REASON_EOS);
  EXPECT_EQ(result.finish.stop_token_id(), stop_id);
}

TEST(TokenizerJsonModelTest, DirectoryWithOnlyTokenizerJsonServesTheSameGreedyIds) {
  ModelDirCopy dir("gemma-tokjson");
  dir.Remove("tokenizer.model");
  dir.Link("tokenizer.json", std::string(GEMMA_TEST_DATA) + "/tokenizers/gemma4-fortunes.tokenizer.json");
  ServerOptions options = TestServerOptions();
  options.backend.model_dir = dir.path();
  auto server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server->address());
  for (const GoldenPrompt& golden : LoadGolden()) {
    v1::GenerateRequest request;
    for (int32_t id : golden.prompt_ids) request.mutable_tokens()->add_ids(id);
    request.mutable_sampling()->set_temperature(0.0f);
    const size_t trusted = TrustedPrefix(golden);
    request.mutable_stopping()->set_max_tokens(static_cast<int>(trusted));
    request.mutable_stopping()->set_ignore_eos(true);
    StreamResult result = RunStream(*stub, request);
    ASSERT_TRUE(result.status.ok()) << result.status.error_message();
    EXPECT_EQ(result.ids, std::vector<int32_t>(golden.greedy.begin(), golden.greedy.begin() + trusted));
  }
}

}  // namespace
}  // namespace gemma::server::testing
