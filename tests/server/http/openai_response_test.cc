// The OpenAI response builder on synthetic engine events: parallel_tool_calls
// false keeps a choice's first tool call, in whole responses and streams.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/http/openai_response.h"

namespace gemma::server::http {
namespace {

using Json = nlohmann::json;

// One event completing two calls, then the finishing event.
std::vector<GenerationEvent> TwoCalls() {
  GenerationEvent calls;
  for (int i = 0; i < 2; ++i) {
    ToolCall call;
    call.id = "call_" + std::to_string(i);
    call.index = i;
    call.name = i == 0 ? "get_weather" : "get_time";
    call.arguments = nlohmann::ordered_json{{"city", "Paris"}};
    calls.tool_calls.push_back(call);
  }
  GenerationEvent done;
  done.finished = true;
  done.finish_reason = FinishReason::kToolCalls;
  return {calls, done};
}

// The tool calls of a streamed choice, in the order the chunks carry them.
std::vector<std::string> StreamedCallNames(const ResponseHeader& header) {
  Choice choice(&header, 0, "");
  std::vector<std::string> names;
  for (const GenerationEvent& event : TwoCalls()) {
    const std::string sse = choice.Chunk(event, false);
    if (sse.empty()) continue;
    const Json chunk = Json::parse(sse.substr(sse.find('{')));
    const Json& delta = chunk["choices"][0]["delta"];
    if (!delta.contains("tool_calls")) continue;
    for (const Json& call : delta["tool_calls"]) names.push_back(call["function"]["name"]);
  }
  return names;
}

std::vector<std::string> WholeCallNames(const ResponseHeader& header) {
  Choice choice(&header, 0, "");
  for (const GenerationEvent& event : TwoCalls()) choice.Add(event);
  std::vector<std::string> names;
  const Json whole = choice.ToJson();
  for (const Json& call : whole["message"]["tool_calls"]) names.push_back(call["function"]["name"]);
  return names;
}

TEST(OpenAiResponse, ParallelToolCallsFalseKeepsTheFirstCall) {
  ResponseHeader header;
  header.endpoint = Endpoint::kChat;
  header.id = "chatcmpl-test";
  header.model = "m";
  const std::vector<std::string> both = {"get_weather", "get_time"}, first = {"get_weather"};
  EXPECT_EQ(WholeCallNames(header), both);
  EXPECT_EQ(StreamedCallNames(header), both);
  header.parallel_tool_calls = false;
  EXPECT_EQ(WholeCallNames(header), first);
  EXPECT_EQ(StreamedCallNames(header), first);
}

}  // namespace
}  // namespace gemma::server::http
