// Unit tests of the Jinja interpreter behind ChatTemplate, one construct at a time. Expected
// strings are what Python jinja2 3.1 renders with transformers' settings.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/chat/json_depth.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gemma {
namespace {

using Json = nlohmann::ordered_json;
using ::testing::HasSubstr;

absl::StatusOr<std::string> Render(const std::string& source, const Json& vars = Json::object()) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(source, "t.jinja");
  if (!t.ok()) return t.status();
  return t->Render(vars.value("messages", Json::array()), nullptr, false, vars, "<bos>", "<eos>");
}

std::string RenderOk(const std::string& source, const Json& vars = Json::object()) {
  absl::StatusOr<std::string> out = Render(source, vars);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "<error>";
}

std::string ErrorOf(const std::string& source, const Json& vars = Json::object()) {
  absl::StatusOr<std::string> out = Render(source, vars);
  EXPECT_FALSE(out.ok()) << "rendered: " << (out.ok() ? *out : "");
  if (out.ok()) return "";
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(out.status().message());
}

TEST(JinjaWhitespace, TrimBlocksAndLstripBlocks) {
  EXPECT_EQ(RenderOk("{% if x %}\n  yes\n{% else %}\n  no\n{% endif %}\n", {{"x", 1}}), "  yes\n");
  EXPECT_EQ(RenderOk("line\n    {% for i in [1, 2] %}\n    item {{ i }}\n    {% endfor %}\nend\n\n"),
            "line\n    item 1\n    item 2\nend\n");
}

TEST(JinjaWhitespace, ExplicitControlAndComments) {
  EXPECT_EQ(RenderOk("<\n  {%- if true %}\n    in\n  {% endif -%}\n>"), "<    in\n>");
  EXPECT_EQ(RenderOk("a\n{# comment #}\nb\n  {#- c -#}  \nd"), "a\nbd");
  EXPECT_EQ(RenderOk("{{ 'a' }}\n{{ 'b' }}\n"), "a\nb");
  EXPECT_EQ(RenderOk("{%- for x in [1, 2] -%}\n  {{ x }},\n{%- endfor %}"), "1,2,");
  EXPECT_EQ(RenderOk(" {%+ if 1 %}x{% endif +%}\ny{%- if 1 -%}  z  {% endif %}"), " x\nyz  ");
}

TEST(JinjaWhitespace, NewlinesAreNormalized) { EXPECT_EQ(RenderOk("x\r\ny\r{% if 1 %}\r\nz{% endif %}"), "x\ny\nz"); }

TEST(JinjaValues, PrintLikePython) {
  EXPECT_EQ(RenderOk("{{ 1e300 * 10 }} {{ 1.5e-10 }} {{ 100.0 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }}"),
            "1e+301 1.5e-10 100.0 1000000000000000.0 0.0001 1e-05");
  EXPECT_EQ(RenderOk("{{ {'\xc3\xa9': ['x', 'it\\'s', \"a\\\"b\", '\\n\\u200b']} }}"),
            "{'\xc3\xa9': ['x', \"it's\", 'a\"b', '\\n\\u200b']}");
  EXPECT_EQ(RenderOk("{{ none }} {{ true }} {{ (1,) }} {{ 7 // 2 }} {{ 1 / 2 }}"), "None True (1,) 3 0.5");
}

TEST(JinjaValues, DictsKeepInsertionOrder) {
  EXPECT_EQ(RenderOk("{% for k in d %}{{ k }}{% endfor %}|{{ d | tojson }}", {{"d", {{"b", 1}, {"a", 2}}}}),
            "ba|{\"b\": 1, \"a\": 2}");
}

TEST(JinjaStatements, LoopVariablesAndControls) {
  EXPECT_EQ(RenderOk("{% for i in 'ab' %}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.previtem }};{% endfor %}"),
            "1TrueFalse;2FalseTruea;");
  EXPECT_EQ(RenderOk("{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "13");
  EXPECT_EQ(RenderOk("{% for k, v in {'a': 1, 'b': 2}.items() if v > 1 %}{{ k }}{{ loop.length }}{% else %}none{% endfor %}"),
            "b1");
  EXPECT_EQ(RenderOk("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
}

TEST(JinjaStatements, ScopingAndNamespace) {
  EXPECT_EQ(RenderOk("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(RenderOk("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
            "6");
  EXPECT_EQ(RenderOk("{% set a, b = 1, 2 %}{% set c %}[{{ a }}{{ b }}]{% endset %}{{ c }}"), "[12]");
  EXPECT_EQ(RenderOk("{% filter upper %}up{% endfilter %}{% raw %}{{ x }}{% endraw %}"), "UP{{ x }}");
}

TEST(JinjaStatements, MacrosWithDefaultsKeywordsAndRecursion) {
  EXPECT_EQ(RenderOk("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                     "{{ greet('A') ~ greet(punct='?', name='B') }}"),
            "Hi A!Hi B?");
  EXPECT_EQ(RenderOk("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
  EXPECT_EQ(ErrorOf("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
            "t.jinja:1: macro 'm' takes not more than 1 argument(s)");
}

TEST(JinjaUndefined, BehavesLikeJinja2DefaultUndefined) {
  EXPECT_EQ(RenderOk("[{{ u }}]{{ u is defined }}{{ u | length }}{% for x in u %}x{% endfor %}{{ u | default('d') }}"
                     "{% if not u %}F{% endif %}{{ d.missing }}{{ d['missing'] }}",
                     {{"d", Json::object()}}),
            "[]False0dF");
  EXPECT_EQ(ErrorOf("line one\n{{ u.x }}"), "t.jinja:2: 'u' is undefined");
  EXPECT_EQ(ErrorOf("{{ d.x.y }}", {{"d", Json::object()}}), "t.jinja:1: 'dict object' has no attribute 'x'");
  EXPECT_EQ(ErrorOf("{{ messages[0]['role'] }}"), "t.jinja:1: list object has no element 0");
}

TEST(JinjaErrors, RaiseExceptionCarriesTheMessage) {
  EXPECT_EQ(ErrorOf("{{ raise_exception('Roles must alternate') }}"), "Roles must alternate");
}

TEST(JinjaErrors, TypeErrorsAndSandbox) {
  EXPECT_EQ(ErrorOf("{{ 'a' + 1 }}"), "t.jinja:1: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(ErrorOf("{{ [].append(1) }}"), "t.jinja:1: access to attribute 'append' of 'list' object is unsafe.");
}

TEST(JinjaErrors, UnsupportedConstructsNameFileLineAndConstruct) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse("a\nb\n{% include 'x.jinja' %}", "my.jinja");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("my.jinja:3:"));
  EXPECT_THAT(t.status().message(), HasSubstr("include"));
  EXPECT_THAT(ErrorOf("\n{{ x | nope }}"), HasSubstr("t.jinja:2: unsupported construct: no filter named 'nope'"));
  EXPECT_THAT(ErrorOf("{% for x in y recursive %}{% endfor %}"), HasSubstr("recursive"));
  EXPECT_THAT(ErrorOf("{% call m() %}{% endcall %}"), HasSubstr("call"));
  EXPECT_THAT(ErrorOf("{% if x %}"), HasSubstr("endif"));
  EXPECT_THAT(ErrorOf("{{ 1 + }}"), HasSubstr("t.jinja:1:"));
}

TEST(JinjaFilters, TojsonMatchesTransformersOverride) {
  EXPECT_EQ(RenderOk("{{ x | tojson }}|{{ x | tojson(indent=2) }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}",
                     {{"x", {{"k", "\xc3\xa9\"\n"}, {"l", {1.0, nullptr, true}}}}}),
            "{\"k\": \"\xc3\xa9\\\"\\n\", \"l\": [1.0, null, true]}|{\n  \"k\": \"\xc3\xa9\\\"\\n\",\n  \"l\": [\n    1.0,\n"
            "    null,\n    true\n  ]\n}|{\"a\": 2, \"b\": 1}");
}

TEST(JinjaFilters, CommonFilters) {
  EXPECT_EQ(RenderOk("{{ ' x\xc2\xa0' | trim }}|{{ {'b': 1, 'A': 2, 'a': 3} | dictsort }}|{{ ['a'] | map('upper') | list }}"
                     "|{{ [{'a': 1}] | map(attribute='a') | join(',') }}|{{ 3.7 | int }}|{{ 2.5 | round }}|{{ none | string }}"),
            "x|[('A', 2), ('a', 3), ('b', 1)]|['A']|1|3|2.0|None");
}

TEST(ChatTemplateApi, ToolsNullIsDefinedNoneAndExtraKeysAreVariables) {
  absl::StatusOr<ChatTemplate> t =
      ChatTemplate::Parse("{{ tools is defined }}{{ tools is none }}{{ enable_thinking }}{{ bos_token }}", "v");
  ASSERT_TRUE(t.ok());
  absl::StatusOr<std::string> out = t->Render(Json::array(), nullptr, true, {{"enable_thinking", true}}, "<b>", "<e>");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "TrueTrueTrue<b>");
}

TEST(ChatTemplateApi, LoadFromModelDir) {
  absl::StatusOr<ChatTemplate> gemma4 = ChatTemplate::LoadFromModelDir(GEMMA_TEST_DATA "/gemma4-31b");
  ASSERT_TRUE(gemma4.ok()) << gemma4.status();
  EXPECT_THAT(gemma4->origin(), HasSubstr("chat_template.jinja"));
  absl::StatusOr<ChatTemplate> gemma3 = ChatTemplate::LoadFromModelDir(GEMMA_TEST_DATA "/gemma3");
  ASSERT_TRUE(gemma3.ok()) << gemma3.status();
  EXPECT_THAT(gemma3->origin(), HasSubstr("tokenizer_config.json"));
  const Json messages = Json::parse(R"([{"role": "user", "content": " Hi "}])");
  absl::StatusOr<std::string> out = gemma3->Render(messages, nullptr, true, Json::object(), "<bos>", "<eos>");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(ChatTemplate::LoadFromModelDir("/nonexistent-dir").status().code(), absl::StatusCode::kNotFound);
}

TEST(ChatTemplateApi, NamedTemplatesTakeTheDefaultOneAndFilesLoad) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("named-templates-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ bos_token }}"}]})";
  absl::StatusOr<ChatTemplate> named = ChatTemplate::LoadFromModelDir(dir.string());
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(*named->Render(Json::array(), nullptr, true, Json::object(), "<b>", "<e>"), "D<b>");
  std::ofstream(dir / "other.jinja") << "F{{ eos_token }}";
  absl::StatusOr<ChatTemplate> file = ChatTemplate::LoadFile((dir / "other.jinja").string());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*file->Render(Json::array(), nullptr, true, Json::object(), "<b>", "<e>"), "F<e>");
  EXPECT_EQ(ChatTemplate::LoadFile((dir / "missing.jinja").string()).status().code(),
            absl::StatusCode::kNotFound);
  std::ofstream(dir / "blank.jinja") << " \n\t\n";  // would render every chat as an empty prompt
  const absl::Status blank = ChatTemplate::LoadFile((dir / "blank.jinja").string()).status();
  EXPECT_EQ(blank.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(blank.message(), HasSubstr("blank.jinja is empty"));
  std::filesystem::remove_all(dir);
}

TEST(ChatTemplateApi, ConcurrentRendersAgree) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::LoadFromModelDir(GEMMA_TEST_DATA "/gemma4-31b");
  ASSERT_TRUE(t.ok());
  const Json messages = Json::parse(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}])");
  const std::string expected = *t->Render(messages, nullptr, true, Json::object(), "<bos>", "<eos>");
  std::vector<std::thread> threads;
  std::vector<std::string> outputs(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) outputs[i] = *t->Render(messages, nullptr, true, Json::object(), "<bos>", "<eos>");
    });
  }
  for (auto& thread : threads) thread.join();
  for (const std::string& out : outputs) EXPECT_EQ(out, expected);
}

// Values nested past kMaxJsonDepth are refused by name before the interpreter
// converts them (a recursion per level): 20 000 levels, a 40 KB request.
TEST(ChatTemplateInput, NestingPastTheLimitIsRefused) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse("{{ messages | length }}", "t.jinja");
  ASSERT_TRUE(t.ok()) << t.status();
  const Json messages = Json::array({{{"role", "user"}, {"content", "hi"}}});
  const Json deep = Json::parse(std::string(20000, '[') + std::string(20000, ']'));
  const Json tools = Json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"x", deep}}}}}}});
  absl::StatusOr<std::string> out = t->Render(messages, tools, false, nullptr, "<bos>", "<eos>");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("tools nest deeper than 128 levels (at [0].function.parameters.x[0]"));
  out = t->Render(messages, nullptr, false, Json{{"k", deep}}, "<bos>", "<eos>");
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("extra template variables nest deeper than 128 levels (at k[0]"));
  Json deep_message = messages;
  deep_message[0]["content"] = deep;
  EXPECT_THAT(t->Render(deep_message, nullptr, false, nullptr, "<bos>", "<eos>").status().message(),
              HasSubstr("messages nest deeper than 128 levels (at [0].content[0]"));
  // At the limit it renders: the messages array is level 1, the content 127 levels under it.
  deep_message[0]["content"] = Json::parse(std::string(126, '[') + std::string(126, ']'));
  out = t->Render(deep_message, nullptr, false, nullptr, "<bos>", "<eos>");
  EXPECT_TRUE(out.ok()) << out.status();
}

TEST(JsonDepth, PathOfTheFirstContainerPastTheLimit) {
  EXPECT_EQ(JsonTooDeep(Json::parse("[[[]]]"), 3), std::nullopt);
  EXPECT_EQ(JsonTooDeep(Json::parse("[[[[]]]]"), 3), "[0][0][0]");
  EXPECT_EQ(JsonTooDeep(Json::parse(R"({"a":1,"b":[2,{"c":{}},[[3]]]})"), 3), "b[1].c");  // empty ones count
  EXPECT_EQ(JsonTooDeep(Json::parse(R"({"a":1,"b":[2,{"c":{}},[[3]]]})"), 4), std::nullopt);
  EXPECT_EQ(JsonTooDeep(Json::parse("5"), 1), std::nullopt);
  EXPECT_EQ(JsonTooDeep(Json::parse("{}"), 1), std::nullopt);
  EXPECT_EQ(JsonTooDeep(Json::parse(R"({"x":{}})"), 1, "body"), "body.x");
  const std::optional<std::string> long_path = JsonTooDeep(Json::parse(std::string(40, '[') + std::string(40, ']')), 20);
  ASSERT_TRUE(long_path.has_value());
  EXPECT_EQ(*long_path, "[0][0][0][0][0][0][0][0][0][0][0][0]...");
}

}  // namespace
}  // namespace gemma
