// Renders seeded conversations (and feature snippets) with ChatTemplate and compares them byte
// for byte with Python jinja2 configured as transformers configures it. The reference file is
// written at test time by make_conversations.py under Debian's /usr/bin/python3.
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "engine/chat/chat_template.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gemma {
namespace {

using Json = nlohmann::ordered_json;

class ChatTemplateReferenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string command = std::string("/usr/bin/python3 ") + GEMMA_CHAT_TEST_DIR +
                                "/make_conversations.py --gemma4 " + GEMMA_TEST_DATA +
                                "/gemma4-31b/chat_template.jinja --gemma3-config " + GEMMA_TEST_DATA +
                                "/gemma3/tokenizer_config.json --out " + GEMMA_CHAT_REFERENCE_JSON;
    const int rc = std::system(command.c_str());
    ASSERT_EQ(rc, 0) << "reference generation failed (needs /usr/bin/python3 with python3-jinja2; "
                        "scripts/setup.sh installs it): "
                     << command;
    std::ifstream in(GEMMA_CHAT_REFERENCE_JSON);
    std::stringstream buf;
    buf << in.rdbuf();
    reference_ = new Json(Json::parse(buf.str()));
  }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
  }

  // Checks every case whose template name starts with `prefix`; returns how many were checked.
  static int CheckCases(const std::string& prefix, int* num_errors) {
    std::map<std::string, ChatTemplate> parsed;
    int checked = 0;
    for (const Json& c : (*reference_)["cases"]) {
      const std::string name = c["template"].get<std::string>();
      if (name.rfind(prefix, 0) != 0) continue;
      auto it = parsed.find(name);
      if (it == parsed.end()) {
        absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse((*reference_)["templates"][name], name);
        EXPECT_TRUE(t.ok()) << t.status();
        if (!t.ok()) continue;
        it = parsed.emplace(name, *std::move(t)).first;
      }
      const absl::StatusOr<std::string> out =
          it->second.Render(c["messages"], c["tools"], c["add_generation_prompt"].get<bool>(), c["extra"],
                            c["bos_token"].get<std::string>(), c["eos_token"].get<std::string>());
      ++checked;
      if (c.contains("expected")) {
        EXPECT_TRUE(out.ok()) << c["name"] << ": " << out.status() << "\nexpected:\n" << c["expected"].get<std::string>();
        if (out.ok()) {
          EXPECT_EQ(*out, c["expected"].get<std::string>()) << c["name"] << "\ncase: " << c.dump();
        }
        continue;
      }
      ++*num_errors;
      const std::string expected_error = c["expected_error"].get<std::string>();
      EXPECT_FALSE(out.ok()) << c["name"] << " should raise: " << expected_error;
      if (out.ok()) continue;
      EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
      const std::string message(out.status().message());
      // raise_exception carries the message as is; other errors are prefixed with origin:line.
      const bool matches = message == expected_error ||
                           (message.size() > expected_error.size() &&
                            message.compare(message.size() - expected_error.size() - 2, std::string::npos,
                                            ": " + expected_error) == 0);
      EXPECT_TRUE(matches) << c["name"] << ": got '" << message << "', jinja2 raised '" << expected_error << "'";
    }
    return checked;
  }

  static Json* reference_;
};

Json* ChatTemplateReferenceTest::reference_ = nullptr;

TEST_F(ChatTemplateReferenceTest, Gemma4MatchesJinja2) {
  int num_errors = 0;
  EXPECT_GE(CheckCases("gemma4", &num_errors), 300);
  EXPECT_GT(num_errors, 0);
}

TEST_F(ChatTemplateReferenceTest, Gemma3MatchesJinja2IncludingRaisedErrors) {
  int num_errors = 0;
  EXPECT_GE(CheckCases("gemma3", &num_errors), 300);
  EXPECT_GT(num_errors, 50);
}

TEST_F(ChatTemplateReferenceTest, FeatureSnippetsMatchJinja2) {
  int num_errors = 0;
  EXPECT_GE(CheckCases("snippet", &num_errors), 60);
}

}  // namespace
}  // namespace gemma
