#include "engine/chat/output_parser.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gemma {
namespace {

using Json = nlohmann::ordered_json;

// Q wraps a string in Gemma's string delimiter.
std::string Q(std::string_view s) { return "<|\"|>" + std::string(s) + "<|\"|>"; }

// Deterministic ids: call_0, call_1, ... per parser.
OutputParserOptions Options(bool thinking_expected = false) {
  OutputParserOptions options;
  options.thinking_expected = thinking_expected;
  auto counter = std::make_shared<int>(0);
  options.make_tool_call_id = [counter] { return "call_" + std::to_string((*counter)++); };
  return options;
}

Json Args(std::string_view gemma_args) {
  absl::StatusOr<Json> parsed = ParseGemmaArguments(gemma_args);
  EXPECT_TRUE(parsed.ok()) << parsed.status() << " for " << gemma_args;
  return parsed.ok() ? *parsed : Json();
}

void Accumulate(ParsedDelta& total, ParsedDelta delta) {
  total.reasoning += delta.reasoning;
  total.content += delta.content;
  for (ToolCall& call : delta.tool_calls) total.tool_calls.push_back(std::move(call));
}

ParsedDelta ParseChunks(const std::vector<std::string>& chunks, OutputParserOptions options) {
  OutputParser parser(std::move(options));
  ParsedDelta total;
  for (const std::string& chunk : chunks) Accumulate(total, parser.Push(chunk));
  Accumulate(total, parser.Finish());
  return total;
}

void ExpectSame(const ParsedDelta& actual, const ParsedDelta& expected, const std::string& what) {
  EXPECT_EQ(actual.reasoning, expected.reasoning) << what;
  EXPECT_EQ(actual.content, expected.content) << what;
  ASSERT_EQ(actual.tool_calls.size(), expected.tool_calls.size()) << what;
  for (size_t i = 0; i < actual.tool_calls.size(); ++i) {
    EXPECT_EQ(actual.tool_calls[i].id, expected.tool_calls[i].id) << what;
    EXPECT_EQ(actual.tool_calls[i].index, expected.tool_calls[i].index) << what;
    EXPECT_EQ(actual.tool_calls[i].name, expected.tool_calls[i].name) << what;
    EXPECT_EQ(actual.tool_calls[i].arguments, expected.tool_calls[i].arguments) << what;
  }
}

// ---------------------------------------------------------------- whole outputs

TEST(OutputParserTest, PlainTextIsContent) {
  OutputParser parser(Options());
  ParsedDelta out = parser.Push("Hello, world!\n");
  Accumulate(out, parser.Finish());
  EXPECT_EQ(out.content, "Hello, world!\n");
  EXPECT_EQ(out.reasoning, "");
  EXPECT_TRUE(out.tool_calls.empty());
  EXPECT_FALSE(parser.saw_tool_calls());
}

TEST(OutputParserTest, ThoughtsThenAnswer) {
  ParsedDelta out =
      ParseOutput("<|channel>thought\nLet me think.\n2+2=4.<channel|>The answer is 4.", Options());
  EXPECT_EQ(out.reasoning, "Let me think.\n2+2=4.");
  EXPECT_EQ(out.content, "The answer is 4.");
  EXPECT_TRUE(out.tool_calls.empty());
}

TEST(OutputParserTest, EmptyThoughtChannelAsInTheGenerationPrompt) {
  ParsedDelta out = ParseOutput("<|channel>thought\n<channel|>Hi", Options());
  EXPECT_EQ(out.reasoning, "");
  EXPECT_EQ(out.content, "Hi");
}

TEST(OutputParserTest, ThoughtHeaderIsStrippedOnlyWhenExact) {
  EXPECT_EQ(ParseOutput("<|channel>Just thinking<channel|>X", Options()).reasoning,
            "Just thinking");
  EXPECT_EQ(ParseOutput("<|channel>thoughtful idea<channel|>X", Options()).reasoning,
            "thoughtful idea");
  // Cut short by the close marker: kept as reasoning, never dropped.
  EXPECT_EQ(ParseOutput("<|channel>thought<channel|>X", Options()).reasoning, "thought");
  EXPECT_EQ(ParseOutput("<|channel>thought\nthought\nx<channel|>", Options()).reasoning,
            "thought\nx");
}

TEST(OutputParserTest, UnterminatedThoughtChannelIsReasoning) {
  OutputParser parser(Options());
  ParsedDelta first = parser.Push("<|channel>thought\nstill thin");
  EXPECT_EQ(first.reasoning, "still thin");  // streamed, not held until Finish
  ParsedDelta rest = parser.Push("king");
  Accumulate(rest, parser.Finish());
  EXPECT_EQ(rest.reasoning, "king");
  EXPECT_EQ(first.content + rest.content, "");
}

TEST(OutputParserTest, ThinkingExpectedStartsInReasoning) {
  ParsedDelta out = ParseOutput("thought\nreason<channel|>answer", Options(true));
  EXPECT_EQ(out.reasoning, "reason");
  EXPECT_EQ(out.content, "answer");
  out = ParseOutput("<|channel>thought\nreason<channel|>answer", Options(true));
  EXPECT_EQ(out.reasoning, "reason");
  EXPECT_EQ(out.content, "answer");
  out = ParseOutput("no channel close at all", Options(true));
  EXPECT_EQ(out.reasoning, "no channel close at all");
  EXPECT_EQ(out.content, "");
}

TEST(OutputParserTest, SecondChannelIsReasoningAgain) {
  ParsedDelta out =
      ParseOutput("<|channel>thought\nA<channel|>one <|channel>thought\nB<channel|>two", Options());
  EXPECT_EQ(out.reasoning, "AB");
  EXPECT_EQ(out.content, "one two");
}

TEST(OutputParserTest, ThoughtsThenSeveralCalls) {
  OutputParser parser(Options());
  ParsedDelta out = parser.Push(
      "<|channel>thought\nNeed weather and time.<channel|>"
      "<|tool_call>call:get_weather{location:" + Q("Paris") + ",days:3}<tool_call|>"
      "<|tool_call>call:get_time{tz:" + Q("Europe/Paris") + "}<tool_call|>");
  Accumulate(out, parser.Finish());
  EXPECT_EQ(out.reasoning, "Need weather and time.");
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].id, "call_0");
  EXPECT_EQ(out.tool_calls[0].index, 0);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(out.tool_calls[0].arguments.dump(), R"({"location":"Paris","days":3})");
  EXPECT_EQ(out.tool_calls[1].id, "call_1");
  EXPECT_EQ(out.tool_calls[1].index, 1);
  EXPECT_EQ(out.tool_calls[1].name, "get_time");
  EXPECT_EQ(out.tool_calls[1].arguments.dump(), R"({"tz":"Europe/Paris"})");
  EXPECT_TRUE(parser.saw_tool_calls());
}

TEST(OutputParserTest, WhitespaceTouchingCallsIsDropped) {
  ParsedDelta out = ParseOutput(
      "Let me check.\n\n<|tool_call>call:f{}<tool_call|>\n<|tool_call>call:g{a:1}<tool_call|>\n",
      Options());
  EXPECT_EQ(out.content, "Let me check.");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[1].arguments, Json({{"a", 1}}));
  // Text after a call keeps the whitespace that separates it from the call.
  out = ParseOutput("Before <|tool_call>call:f{}<tool_call|>\n\nAfter \n", Options());
  EXPECT_EQ(out.content, "Before\n\nAfter \n");
  // Without calls every byte is content.
  EXPECT_EQ(ParseOutput("  a \n b\t\n", Options()).content, "  a \n b\t\n");
}

TEST(OutputParserTest, NestedAndUnicodeArguments) {
  ParsedDelta out = ParseOutput("<|tool_call>call:create_user{user:{name:" + Q("José 🌍") +
                                    ",tags:[" + Q("a") + "," + Q("b") + "]},city:" + Q("東京") +
                                    "}<tool_call|>",
                                Options());
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments.dump(),
            R"({"user":{"name":"José 🌍","tags":["a","b"]},"city":"東京"})");
}

TEST(OutputParserTest, ArraysOfObjects) {
  Json args = Args("{items:[{id:1,ok:true},{id:2,ok:false,sub:[[1,2],[]]}],empty:{}}");
  EXPECT_EQ(args.dump(),
            R"({"items":[{"id":1,"ok":true},{"id":2,"ok":false,"sub":[[1,2],[]]}],"empty":{}})");
}

TEST(OutputParserTest, NumbersBooleansNull) {
  Json args = Args("{i:-42,f:3.5,e:1e3,z:0,t:true,fa:false,n:null,n2:None,n3:nil,big:12345678901}");
  EXPECT_TRUE(args["i"].is_number_integer());
  EXPECT_EQ(args["i"], -42);
  EXPECT_TRUE(args["f"].is_number_float());
  EXPECT_EQ(args["f"], 3.5);
  EXPECT_EQ(args["e"], 1000.0);
  EXPECT_EQ(args["z"], 0);
  EXPECT_EQ(args["t"], true);
  EXPECT_EQ(args["fa"], false);
  EXPECT_TRUE(args["n"].is_null());
  EXPECT_TRUE(args["n2"].is_null());
  EXPECT_TRUE(args["n3"].is_null());
  EXPECT_EQ(args["big"], 12345678901LL);
  // Not numbers: bare words stay strings (as in vLLM).
  EXPECT_EQ(Args("{u:celsius,v:1.2.3,w:007}").dump(), R"({"u":"celsius","v":"1.2.3","w":"007"})");
}

TEST(OutputParserTest, StringsKeepStructuralCharactersAndQuotes) {
  const std::string s = R"(a{b}c, d: "e" 'f' [g] \n <tag>)";
  ParsedDelta out = ParseOutput("<|tool_call>call:echo{text:" + Q(s) + ",x:" + Q("") +
                                    "}<tool_call|>",
                                Options());
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments["text"], s);
  EXPECT_EQ(out.tool_calls[0].arguments["x"], "");
  EXPECT_EQ(out.content, "");
}

TEST(OutputParserTest, ArgumentSyntaxVariants) {
  EXPECT_EQ(Args("{}"), Json::object());
  EXPECT_EQ(Args("{b:1,a:2}").dump(), R"({"b":1,"a":2})");  // model order kept
  EXPECT_EQ(Args("{<|\"|>my key<|\"|>:1}").dump(), R"({"my key":1})");
  EXPECT_EQ(Args(" { a : 1 ,\n b : [ 1 , 2 , ] , } ").dump(), R"({"a":1,"b":[1,2]})");
  EXPECT_EQ(Args("{time:12:30}").dump(), R"({"time":"12:30"})");
}

TEST(OutputParserTest, MalformedArgumentsAreErrors) {
  for (std::string bad : {std::string("{a:") + "<|\"|>x}", std::string("{a:1"), std::string("{a:1}x"),
                          std::string("{a:}"), std::string("{a}"), std::string("[1]"),
                          std::string(""), std::string("{a:[1,2}"), std::string("{a:{b:1]}"),
                          std::string("{:1}"), std::string("{a:1 " + Q("x") + "}"),
                          std::string("{a:\xff}")}) {
    EXPECT_FALSE(ParseGemmaArguments(bad).ok()) << bad;
  }
  EXPECT_FALSE(ParseGemmaArguments(std::string(100, '[').insert(0, "{a:")).ok());
  std::string deep = "{a:" + std::string(70, '[') + std::string(70, ']') + "}";
  EXPECT_FALSE(ParseGemmaArguments(deep).ok());
}

TEST(OutputParserTest, TruncatedCallIsHeldThenReturnedAsContent) {
  OutputParser parser(Options());
  ParsedDelta pushed = parser.Push("Sure. <|tool_call>call:search{query:" + Q("cats").substr(0, 9));
  EXPECT_EQ(pushed.content, "Sure.");
  EXPECT_TRUE(pushed.tool_calls.empty());
  ParsedDelta finished = parser.Finish();
  EXPECT_EQ(finished.content, " <|tool_call>call:search{query:<|\"|>cats");
  EXPECT_TRUE(finished.tool_calls.empty());
  EXPECT_FALSE(parser.saw_tool_calls());
  EXPECT_TRUE(parser.Finish().empty());
}

TEST(OutputParserTest, MalformedCallsAreContentAndLaterCallsStillParse) {
  const std::string bad_args = "<|tool_call>call:f{a:" + std::string("<|\"|>x}") + "<tool_call|>";
  const std::string no_prefix = "<|tool_call>f{}<tool_call|>";
  const std::string bad_name = "<|tool_call>call:bad name{}<tool_call|>";
  ParsedDelta out = ParseOutput(bad_args + no_prefix + bad_name +
                                    "<|tool_call>call:ok{v:1}<tool_call|>",
                                Options());
  EXPECT_EQ(out.content, bad_args + no_prefix + bad_name);
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "ok");
  EXPECT_EQ(out.tool_calls[0].index, 0);
}

TEST(OutputParserTest, NewCallBeforeCloseAbandonsTheOpenOne) {
  ParsedDelta out =
      ParseOutput("<|tool_call>call:f{a:1<|tool_call>call:g{b:2}<tool_call|>", Options());
  EXPECT_EQ(out.content, "<|tool_call>call:f{a:1");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "g");
}

TEST(OutputParserTest, CallInsideUnclosedThoughtClosesIt) {
  ParsedDelta out =
      ParseOutput("<|channel>thought\nI'll call f.<|tool_call>call:f{}<tool_call|>", Options());
  EXPECT_EQ(out.reasoning, "I'll call f.");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "f");
}

TEST(OutputParserTest, DisabledParsingKeepsMarkupVerbatim) {
  const std::string text =
      "<|channel>thought\nr<channel|>c<|tool_call>call:f{a:" + Q("x") + "}<tool_call|>";
  OutputParserOptions no_calls = Options();
  no_calls.parse_tool_calls = false;
  ParsedDelta out = ParseOutput(text, no_calls);
  EXPECT_EQ(out.reasoning, "r");
  EXPECT_EQ(out.content, "c<|tool_call>call:f{a:" + Q("x") + "}<tool_call|>");
  EXPECT_TRUE(out.tool_calls.empty());

  OutputParserOptions nothing = no_calls;
  nothing.parse_reasoning = false;
  out = ParseOutput(text, nothing);
  EXPECT_EQ(out.reasoning, "");
  EXPECT_EQ(out.content, text);
}

TEST(OutputParserTest, SkippedSpecialTokensLeaveEverythingAsContent) {
  // What skip_special_tokens=true leaves of a thought and a call.
  const std::string text = "thought\nhmm\nThe answer.call:f{a:x}";
  ParsedDelta out = ParseOutput(text, Options());
  EXPECT_EQ(out.content, text);
  EXPECT_TRUE(out.tool_calls.empty());
}

TEST(OutputParserTest, PartialMarkerIsHeldUntilResolved) {
  OutputParser parser(Options());
  EXPECT_EQ(parser.Push("abc<|tool").content, "abc");
  EXPECT_EQ(parser.Push("x").content, "<|toolx");
  EXPECT_EQ(parser.Push("<").content, "");
  EXPECT_EQ(parser.Finish().content, "<");
}

TEST(OutputParserTest, DefaultIdsAreRandomWithCallPrefix) {
  OutputParser parser;
  ParsedDelta out = parser.Push("<|tool_call>call:f{}<tool_call|><|tool_call>call:f{}<tool_call|>");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  for (const ToolCall& call : out.tool_calls) {
    EXPECT_EQ(call.id.size(), 5u + 24u);
    EXPECT_EQ(call.id.substr(0, 5), "call_");
  }
  EXPECT_NE(out.tool_calls[0].id, out.tool_calls[1].id);
}

// ------------------------------------------------- chunking property tests

const std::vector<std::string>& Samples() {
  static const std::vector<std::string> samples = {
      "<|channel>thought\nPlan: call both.<channel|>Sure.\n\n<|tool_call>call:get_weather{"
      "location:" + Q("Paris, FR") + ",days:3,opts:{unit:" + Q("°C") + ",hourly:[true,null]}}"
      "<tool_call|>\n<|tool_call>call:get_time{}<tool_call|>\n",
      "Hi <|tool_call>call:f{a:" + Q("x") + "<tool_call|> after <|tool_call>call:g{s:" + Q("{}") +
          "}<tool_call|>",
      "<|channel>thought<channel|>x <|channel>tho<|tool_call>call:f{a:1<|tool_call>call:g{}"
      "<tool_call|> tail <|tool_call>call:h{v:" + Q("unterminated"),
      "<<|<|t<|tool<channel|><|channel>thought\n<<|channel>thought\nz<tool_call|> done",
  };
  return samples;
}

TEST(OutputParserChunkingTest, EverySplitIntoTwoAndThreeChunks) {
  for (bool thinking_expected : {false, true}) {
    for (const std::string& text : Samples()) {
      const ParsedDelta whole = ParseOutput(text, Options(thinking_expected));
      for (size_t i = 0; i <= text.size(); ++i) {
        ExpectSame(ParseChunks({text.substr(0, i), text.substr(i)}, Options(thinking_expected)),
                   whole, "split at " + std::to_string(i) + " of " + text);
        if (::testing::Test::HasFailure()) return;
        for (size_t j = i; j <= text.size(); j += 3) {
          ExpectSame(ParseChunks({text.substr(0, i), text.substr(i, j - i), text.substr(j)},
                                 Options(thinking_expected)),
                     whole, "split at " + std::to_string(i) + "," + std::to_string(j));
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
}

TEST(OutputParserChunkingTest, ByteByByteAndRandomChunks) {
  std::mt19937 rng(1234);
  for (const std::string& text : Samples()) {
    const ParsedDelta whole = ParseOutput(text, Options());
    std::vector<std::string> bytes;
    for (char c : text) bytes.emplace_back(1, c);
    ExpectSame(ParseChunks(bytes, Options()), whole, "byte by byte: " + text);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<std::string> chunks;
      for (size_t pos = 0; pos < text.size();) {
        const size_t len = std::uniform_int_distribution<size_t>(0, 8)(rng);
        chunks.push_back(text.substr(pos, len));
        pos += len;
      }
      ExpectSame(ParseChunks(chunks, Options()), whole, "random chunks: " + text);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(OutputParserChunkingTest, SamplesParseAsExpected) {
  // Pins the one-shot results the chunking tests compare against.
  ParsedDelta first = ParseOutput(Samples()[0], Options());
  EXPECT_EQ(first.reasoning, "Plan: call both.");
  EXPECT_EQ(first.content, "Sure.");
  ASSERT_EQ(first.tool_calls.size(), 2u);
  EXPECT_EQ(first.tool_calls[0].arguments.dump(),
            R"({"location":"Paris, FR","days":3,"opts":{"unit":"°C","hourly":[true,null]}})");

  ParsedDelta second = ParseOutput(Samples()[1], Options());
  EXPECT_EQ(second.content, "Hi <|tool_call>call:f{a:" + Q("x") + "<tool_call|> after");
  ASSERT_EQ(second.tool_calls.size(), 1u);
  EXPECT_EQ(second.tool_calls[0].arguments.dump(), R"({"s":"{}"})");

  ParsedDelta third = ParseOutput(Samples()[2], Options());
  EXPECT_EQ(third.reasoning, "thoughttho");
  EXPECT_EQ(third.content,
            "x <|tool_call>call:f{a:1 tail <|tool_call>call:h{v:" + Q("unterminated"));
  ASSERT_EQ(third.tool_calls.size(), 1u);
  EXPECT_EQ(third.tool_calls[0].name, "g");

  ParsedDelta fourth = ParseOutput(Samples()[3], Options());
  EXPECT_EQ(fourth.content, "<<|<|t<|tool<channel|>");
  EXPECT_EQ(fourth.reasoning, "<z<tool_call|> done");
}

}  // namespace
}  // namespace gemma

namespace gemma {
namespace {

// A forced tool call's opening ends the prompt; the parser reads it as the
// output's beginning, so the generated rest completes a named call.
TEST(OutputParserTest, OutputPrefixStartsAForcedCall) {
  // Fresh options each time: their tool-call ids count per copy set.
  auto options_with = [](std::string prefix) {
    OutputParserOptions options = Options();
    options.output_prefix = std::move(prefix);
    return options;
  };
  const std::string named = "<|tool_call>call:get_weather{";
  const std::string generated = "city:" + Q("Paris") + "}<tool_call|>";
  const ParsedDelta whole = ParseChunks({generated}, options_with(named));
  ASSERT_EQ(whole.tool_calls.size(), 1u);
  EXPECT_EQ(whole.tool_calls[0].name, "get_weather");
  EXPECT_EQ(whole.tool_calls[0].arguments, Args("{city:" + Q("Paris") + "}"));
  EXPECT_EQ(whole.content, "");
  // Any chunking, the prefix alone included, gives the same.
  ExpectSame(ParseChunks({"ci", "ty:<|\"|>Pa", "ris<|\"|>", "}<tool_", "call|>"},
                         options_with(named)),
             whole, "chunked");
  // With any function ("required") the name is generated too.
  ExpectSame(ParseChunks({"get_weather{", "city:" + Q("Paris") + "}<tool_call|>"},
                         options_with("<|tool_call>call:")),
             whole,
             "name generated");
  // A call never closed comes back as content that begins with the opening.
  const ParsedDelta open = ParseChunks({"city:", "Par"}, options_with(named));
  EXPECT_TRUE(open.tool_calls.empty());
  EXPECT_EQ(open.content, "<|tool_call>call:get_weather{city:Par");
  // Plain text as a prefix is content, returned with the first Push.
  OutputParser parser(options_with("Sure: "));
  EXPECT_EQ(parser.Push("yes").content, "Sure: yes");
}

}  // namespace
}  // namespace gemma
