#include "tests/server/server_test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <mutex>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gemma::server::testing {

ServerOptions TestServerOptions() {
  ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.backend.model_dir = kModelDir;
  options.backend.backend = "cpu";
  options.backend.max_slots = 32;
  options.max_queue = 64;
  options.backend.max_context = 1024;
  options.backend.num_threads = 1;  // the CI machine has 2 cores shared by everything
  return options;
}

std::unique_ptr<GemmaServer> StartTestServer(const ServerOptions& options) {
  absl::StatusOr<std::unique_ptr<GemmaServer>> server = GemmaServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return nullptr;
  absl::Status loaded = (*server)->Load();
  EXPECT_TRUE(loaded.ok()) << loaded;
  if (!loaded.ok()) return nullptr;
  return *std::move(server);
}

std::shared_ptr<grpc::Channel> Connect(const std::string& address) {
  return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
}

std::unique_ptr<v1::Gemma::Stub> NewStub(const std::string& address) {
  return v1::Gemma::NewStub(Connect(address));
}

StreamResult RunStream(v1::Gemma::Stub& stub, const v1::GenerateRequest& request,
                       std::chrono::milliseconds timeout) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  StreamResult result;
  auto reader = stub.Generate(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    ++result.num_messages;
    result.ids.insert(result.ids.end(), response.token_ids().begin(), response.token_ids().end());
    result.text += response.text();
    result.deltas.push_back(response.text());
    result.reasoning += response.reasoning();
    result.tool_calls.insert(result.tool_calls.end(), response.tool_calls().begin(),
                             response.tool_calls().end());
    result.request_ids.push_back(response.request_id());
    result.logprobs.insert(result.logprobs.end(), response.logprobs().begin(),
                           response.logprobs().end());
    if (response.has_finish()) {
      result.finish = response.finish();
      result.has_finish = true;
    }
  }
  result.status = reader->Finish();
  return result;
}

v1::GenerateRequest GreedyText(const std::string& text, int max_tokens) {
  v1::GenerateRequest request;
  request.set_text(text);
  request.mutable_sampling()->set_temperature(0.0f);
  request.mutable_stopping()->set_max_tokens(max_tokens);
  request.mutable_stopping()->set_ignore_eos(true);
  return request;
}

std::vector<GoldenPrompt> LoadGolden() {
  std::ifstream file(kModelDir + "/golden.json");
  nlohmann::json json = nlohmann::json::parse(file);
  std::vector<GoldenPrompt> prompts;
  for (const auto& p : json.at("prompts")) {
    if (p.at("kind") != "text") continue;
    prompts.push_back({p.at("text").get<std::string>(), p.at("ids").get<std::vector<int32_t>>(),
                       p.at("greedy").get<std::vector<int32_t>>(),
                       p.at("margins").get<std::vector<double>>()});
  }
  return prompts;
}

size_t TrustedPrefix(const GoldenPrompt& golden, double min_margin) {
  size_t n = 0;
  while (n < golden.margins.size() && golden.margins[n] >= min_margin) ++n;
  return n;
}

struct Subprocess::Output {
  mutable std::mutex mu;
  std::condition_variable changed;
  std::string text;
  bool eof = false;
};

Subprocess::Subprocess(const std::vector<std::string>& argv) : output_(std::make_shared<Output>()) {
  // Built before fork: the child of a multi-threaded parent may only make
  // async-signal-safe calls until exec.
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  pid_ = fork();
  if (pid_ == 0) {
    // A test killed at its timeout must not leave a server running.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  reader_ = std::thread([fd = fds[0], out = output_] {
    char chunk[4096];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
      std::lock_guard<std::mutex> lock(out->mu);
      out->text.append(chunk, static_cast<size_t>(n));
      out->changed.notify_all();
    }
    close(fd);
    std::lock_guard<std::mutex> lock(out->mu);
    out->eof = true;
    out->changed.notify_all();
  });
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (reader_.joinable()) reader_.join();
}

std::string Subprocess::WaitForLine(const std::string& needle, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(output_->mu);
  std::string line;
  output_->changed.wait_for(lock, timeout, [&] {
    const size_t at = output_->text.find(needle);
    if (at == std::string::npos) return output_->eof;
    const size_t begin = output_->text.rfind('\n', at);
    const size_t end = output_->text.find('\n', at);
    if (end == std::string::npos) return output_->eof;  // the line is not complete yet
    line = output_->text.substr(begin == std::string::npos ? 0 : begin + 1,
                                end - (begin == std::string::npos ? 0 : begin + 1));
    return true;
  });
  return line;
}

void Subprocess::Signal(int signal_number) {
  if (pid_ > 0 && !reaped_) kill(pid_, signal_number);
}

int Subprocess::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) break;
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  reaped_ = true;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

std::string Subprocess::output() const {
  std::lock_guard<std::mutex> lock(output_->mu);
  return output_->text;
}

std::string RunCommand(const std::vector<std::string>& argv, int* exit_code) {
  Subprocess process(argv);
  *exit_code = process.Wait(std::chrono::seconds(300));
  process.WaitForLine("\x01never\x01", std::chrono::seconds(5));  // until EOF
  return process.output();
}

}  // namespace gemma::server::testing
