#include "clients/cli/commands.h"

#include <chrono>
#include <fstream>
#include <sstream>
#include <iostream>
#include <memory>

#include <grpcpp/grpcpp.h>

#include "gemma/v1/gemma.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "absl/status/status.h"

namespace gemma::cli {
namespace {

std::unique_ptr<v1::Gemma::Stub> Connect(const CommonOptions& common) {
  return v1::Gemma::NewStub(
      grpc::CreateChannel(common.addr, MakeChannelCredentials(common.security)));
}

void SetDeadline(const CommonOptions& common, grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(common.timeout_s * 1000)));
  AddCallCredentials(common.security, context);
}

std::string CodeName(grpc::StatusCode code) {
  // grpc::StatusCode and absl::StatusCode share their numbering.
  const std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "UNKNOWN" : name;
}

int Fail(const grpc::Status& status) {
  std::cerr << "error: " << CodeName(status.error_code()) << ": " << status.error_message()
            << "\n";
  return 1;
}

void PrintFinish(const v1::Finish& finish) {
  std::cerr << "\n[finish: " << v1::FinishReason_Name(finish.reason());
  if (finish.has_stop_string()) std::cerr << " '" << finish.stop_string() << "'";
  if (finish.has_stop_token_id()) std::cerr << " (token " << finish.stop_token_id() << ")";
  std::cerr << ", prompt " << finish.usage().prompt_tokens() << " tokens, completion "
            << finish.usage().completion_tokens() << " tokens, ttft "
            << finish.timings().time_to_first_token_ms() << " ms, total "
            << finish.timings().total_ms() << " ms]\n";
}

// What one streamed completion returned.
struct Reply {
  std::string text;
  std::vector<v1::ToolCall> tool_calls;
};

// Streams one completion: text to stdout, reasoning and tool calls to stderr.
int StreamCompletion(const CommonOptions& common, const GenerateOptions& options,
                     const v1::GenerateRequest& request, Reply* reply) {
  auto stub = Connect(common);
  grpc::ClientContext context;
  SetDeadline(common, &context);
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub->Generate(&context, request);
  v1::GenerateResponse response;
  std::vector<int32_t> ids;
  bool in_reasoning = false;
  while (reader->Read(&response)) {
    if (!response.reasoning().empty()) {
      if (!in_reasoning) std::cerr << "[thinking] ";
      in_reasoning = true;
      std::cerr << response.reasoning() << std::flush;
    }
    if (!response.text().empty() && in_reasoning) {
      std::cerr << "\n[/thinking]\n";
      in_reasoning = false;
    }
    std::cout << response.text() << std::flush;
    reply->text.append(response.text());
    for (const v1::ToolCall& call : response.tool_calls()) {
      std::cerr << "\n[tool call " << call.id() << "] " << call.name() << " " << call.arguments() << "\n";
      reply->tool_calls.push_back(call);
    }
    ids.insert(ids.end(), response.token_ids().begin(), response.token_ids().end());
    if (response.has_finish() && options.verbose) PrintFinish(response.finish());
  }
  std::cout << "\n";
  if (grpc::Status status = reader->Finish(); !status.ok()) return Fail(status);
  if (options.print_ids) {
    std::cout << "ids:";
    for (int32_t id : ids) std::cout << " " << id;
    std::cout << "\n";
  }
  return 0;
}

bool ReadFile(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  *text = buffer.str();
  return static_cast<bool>(in);
}

// "/tool NAME JSON" -> a tool message answering the last call to NAME.
bool AddToolResponse(const std::string& line, const Reply& last, v1::Chat* conversation) {
  std::istringstream words(line.substr(6));
  std::string name;
  words >> name;
  std::string content;
  std::getline(words, content);
  v1::ChatMessage* tool = conversation->add_messages();
  tool->set_role("tool");
  tool->set_name(name);
  tool->set_content(content.empty() ? content : content.substr(1));
  for (const v1::ToolCall& call : last.tool_calls) {
    if (call.name() == name) tool->set_tool_call_id(call.id());
  }
  return !name.empty();
}

}  // namespace

void ApplyGenerateOptions(const GenerateOptions& o, v1::GenerateRequest* request) {
  request->set_request_id(o.request_id);
  v1::SamplingParams* s = request->mutable_sampling();
  if (o.greedy) s->set_temperature(0.0f);
  else if (o.temperature) s->set_temperature(*o.temperature);
  if (o.top_p) s->set_top_p(*o.top_p);
  if (o.repetition_penalty) s->set_repetition_penalty(*o.repetition_penalty);
  if (o.top_k) s->set_top_k(*o.top_k);
  s->set_min_p(o.min_p);
  s->set_presence_penalty(o.presence_penalty);
  s->set_frequency_penalty(o.frequency_penalty);
  if (o.seed) s->set_seed(*o.seed);
  v1::StoppingCriteria* stop = request->mutable_stopping();
  if (o.max_tokens) stop->set_max_tokens(*o.max_tokens);
  stop->set_min_tokens(o.min_tokens);
  for (const std::string& text : o.stop) stop->add_stop(text);
  for (int32_t id : o.stop_token_ids) stop->add_stop_token_ids(id);
  stop->set_ignore_eos(o.ignore_eos);
  if (o.logprobs) request->set_logprobs(*o.logprobs);
}

int RunGenerate(const CommonOptions& common, const GenerateOptions& options,
                const std::string& prompt, const std::vector<int32_t>& prompt_ids) {
  v1::GenerateRequest request;
  ApplyGenerateOptions(options, &request);
  if (!prompt_ids.empty()) {
    request.mutable_tokens()->mutable_ids()->Add(prompt_ids.begin(), prompt_ids.end());
  } else {
    request.set_text(prompt);
  }
  Reply reply;
  return StreamCompletion(common, options, request, &reply);
}

int RunChat(const CommonOptions& common, const GenerateOptions& options,
            const ChatOptions& chat, std::istream& in) {
  v1::Chat conversation;
  if (!chat.tools_file.empty() && !ReadFile(chat.tools_file, conversation.mutable_tools())) {
    std::cerr << "error: cannot read --tools " << chat.tools_file << "\n";
    return 2;
  }
  if (chat.think) conversation.set_template_kwargs(R"({"enable_thinking": true})");
  if (!chat.system_prompt.empty()) {
    v1::ChatMessage* system = conversation.add_messages();
    system->set_role("system");
    system->set_content(chat.system_prompt);
  }
  const bool interactive = &in == &std::cin;
  std::string line;
  Reply last;
  while (true) {
    if (interactive) std::cerr << "> " << std::flush;
    if (!std::getline(in, line)) break;
    if (line.empty()) continue;
    if (line.starts_with("/tool ")) {
      if (!AddToolResponse(line, last, &conversation)) {
        std::cerr << "usage: /tool NAME JSON\n";
        continue;
      }
    } else {
      v1::ChatMessage* user = conversation.add_messages();
      user->set_role("user");
      user->set_content(line);
    }
    v1::GenerateRequest request;
    ApplyGenerateOptions(options, &request);
    *request.mutable_chat() = conversation;
    last = Reply();
    if (int code = StreamCompletion(common, options, request, &last); code != 0) return code;
    v1::ChatMessage* model = conversation.add_messages();
    model->set_role("assistant");
    model->set_content(last.text);
    for (const v1::ToolCall& call : last.tool_calls) *model->add_tool_calls() = call;
  }
  return 0;
}

int RunTokenize(const CommonOptions& common, const std::string& text, bool add_bos) {
  auto stub = Connect(common);
  grpc::ClientContext context;
  SetDeadline(common, &context);
  v1::TokenizeRequest request;
  request.set_text(text);
  request.set_add_bos(add_bos);
  v1::TokenizeResponse response;
  if (grpc::Status status = stub->Tokenize(&context, request, &response); !status.ok()) {
    return Fail(status);
  }
  for (int i = 0; i < response.ids_size(); ++i) {
    std::cout << response.ids(i) << "\t" << response.pieces(i) << "\n";
  }
  return 0;
}

int RunInfo(const CommonOptions& common) {
  auto stub = Connect(common);
  grpc::ClientContext context;
  SetDeadline(common, &context);
  v1::ModelInfo info;
  if (grpc::Status status = stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
      !status.ok()) {
    return Fail(status);
  }
  std::cout << info.DebugString();
  return 0;
}

int RunStatus(const CommonOptions& common) {
  auto stub = Connect(common);
  grpc::ClientContext context;
  SetDeadline(common, &context);
  v1::ServerStatus status;
  if (grpc::Status s = stub->GetServerStatus(&context, v1::GetServerStatusRequest(), &status);
      !s.ok()) {
    return Fail(s);
  }
  std::cout << status.DebugString();
  return 0;
}

int RunHealth(const CommonOptions& common, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(common.addr, MakeChannelCredentials(common.security)));
  grpc::ClientContext context;
  SetDeadline(common, &context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  if (grpc::Status status = stub->Check(&context, request, &response); !status.ok()) {
    return Fail(status);
  }
  std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()) << "\n";
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

}  // namespace gemma::cli
