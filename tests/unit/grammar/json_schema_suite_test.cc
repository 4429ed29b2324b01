// Conformance of JSON-Schema constraints against the JSON-Schema-Test-Suite
// (Debian's json-schema-test-suite, draft 7): each schema is compiled as a
// request's constraint would be (on a byte vocabulary, so every document is
// a sequence of tokens), and each test document is walked through the
// matcher. What the matcher accepts is what the engine could write.
//
// The promise (docs/protocol/public-api.md, "Structured output"): an
// accepted document is valid — except under oneOf (Unenforced(), named in
// the docs). A schema with a rule XGrammar would not enforce, or one it
// cannot compile, is refused at admission (counted, never a silent pass);
// the suite's typeless number/string/array rules are also run typed. Valid documents the grammar
// refuses are allowed: the engine writes a narrower language (properties in schema order, no
// additional properties unless the schema allows them, integers without ".0").
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "common/grammar/grammar_compiler.h"
#include "common/grammar/grammar_matcher.h"
#include "common/grammar/json_schema_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pdserve {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kSuite[] = "/usr/share/json-schema-test-suite/tests/draft7";
constexpr int32_t kEnd = 256;

// Keyword files where an invalid document may be accepted, each named in
// the public docs: oneOf branches XGrammar cannot prove disjoint are read
// as anyOf. Every other rule it would not enforce is refused
// (json_schema_support.h).
const std::set<std::string>& Unenforced() {
  static const auto* s = new std::set<std::string>{"oneOf.json"};
  return *s;
}

GrammarVocab ByteVocab() {
  GrammarVocab v;
  for (int b = 0; b < 256; ++b) v.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  v.token_bytes.push_back("");
  v.vocab_size = kEnd + 1;
  v.stop_token_ids = {kEnd};
  return v;
}

bool Accepts(const std::shared_ptr<const CompiledGrammar>& grammar, const std::string& text) {
  GrammarMatcher m(grammar);
  for (unsigned char c : text) {
    if (!m.Accept(c)) return false;
  }
  return m.Accept(kEnd);
}

// The JSON Schema type of a document ("number" for all numbers).
std::string TypeOf(const Json& j) {
  if (j.is_number()) return "number";
  if (j.is_string()) return "string";
  if (j.is_boolean()) return "boolean";
  if (j.is_null()) return "null";
  return j.is_array() ? "array" : "object";
}

struct Tally {
  int typed = 0;  // tests run on a typed variant of a refused schema
  int groups = 0, refused = 0, tests = 0, accepted_valid = 0, rejected_invalid = 0,
      rejected_valid = 0, accepted_invalid = 0;
};

TEST(JsonSchemaSuiteTest, AcceptedDocumentsValidateOrTheFeatureIsDocumented) {
  if (!std::filesystem::is_directory(kSuite)) {
    GTEST_SKIP() << kSuite << " not found (Debian's json-schema-test-suite; make setup)";
  }
  auto compiler = GrammarCompiler::Create(ByteVocab());
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  std::map<std::string, Tally> tallies;
  for (const auto& entry : std::filesystem::directory_iterator(kSuite)) {
    if (entry.path().extension() != ".json") continue;
    const std::string file = entry.path().filename().string();
    std::ifstream in(entry.path());
    const Json groups = Json::parse(in);
    Tally& t = tallies[file];
    for (const Json& group : groups) {
      ++t.groups;
      auto grammar = (*compiler)->Compile(GrammarConstraint::JsonSchema(group["schema"].dump()));
      if (!grammar.ok()) ++t.refused;  // INVALID_ARGUMENT at admission: never a silent pass
      // A rule refused for want of a type at the top is also tried typed:
      // {"minimum": 1} as {"minimum": 1, "type": "number"} on the numbers.
      const bool typed = !grammar.ok() &&
                         absl::StrContains(grammar.status().message(), "JSON schema at '/': '") &&
                         absl::StrContains(grammar.status().message(), "needs a 'type'");
      if (!grammar.ok() && !typed) continue;
      for (const Json& test : group["tests"]) {
        std::shared_ptr<const CompiledGrammar> g = grammar.ok() ? *grammar : nullptr;
        if (typed) {
          Json schema = group["schema"];
          schema["type"] = TypeOf(test["data"]);
          auto variant = (*compiler)->Compile(GrammarConstraint::JsonSchema(schema.dump()));
          if (!variant.ok()) continue;
          g = *variant;
          ++t.typed;
        }
        ++t.tests;
        const bool valid = test["valid"].get<bool>();
        const bool accepted = Accepts(g, test["data"].dump());
        (accepted ? (valid ? t.accepted_valid : t.accepted_invalid)
                  : (valid ? t.rejected_valid : t.rejected_invalid))++;
        if (accepted && !valid && !Unenforced().contains(file)) {
          ADD_FAILURE() << file << ": \"" << group["description"].get<std::string>() << "\" / \""
                        << test["description"].get<std::string>()
                        << "\": an invalid document is accepted, and " << file
                        << "'s feature is not listed as unenforced";
        }
      }
    }
  }
  // The table docs/PERFORMANCE.md's conformance section quotes.
  Tally all;
  std::printf("%-26s %6s %7s %6s %5s %9s %9s %9s %9s\n", "file", "groups", "refused", "tests",
              "typed", "acc+valid", "rej+inval", "rej+valid", "ACC+INVAL");
  for (const auto& [file, t] : tallies) {
    std::printf("%-26s %6d %7d %6d %5d %9d %9d %9d %9d\n", file.c_str(), t.groups, t.refused,
                t.tests, t.typed, t.accepted_valid, t.rejected_invalid, t.rejected_valid,
                t.accepted_invalid);
    all.groups += t.groups;
    all.refused += t.refused;
    all.tests += t.tests;
    all.typed += t.typed;
    all.accepted_valid += t.accepted_valid;
    all.rejected_invalid += t.rejected_invalid;
    all.rejected_valid += t.rejected_valid;
    all.accepted_invalid += t.accepted_invalid;
  }
  std::printf("%-26s %6d %7d %6d %5d %9d %9d %9d %9d\n", "all", all.groups, all.refused, all.tests,
              all.typed, all.accepted_valid, all.rejected_invalid, all.rejected_valid,
              all.accepted_invalid);
  EXPECT_GT(all.accepted_valid, 0);
  EXPECT_GT(all.rejected_invalid, 0);
}

TEST(JsonSchemaSupportTest, RulesXGrammarWouldLeaveOutAreRefused) {
  for (const char* schema :
       {R"({"type": "array", "uniqueItems": true})", R"({"type": "integer", "multipleOf": 2})",
        R"({"minimum": 1})", R"({"type": "object", "properties": {"a": {"maxLength": 2}}})",
        R"({"$ref": "http://example.com/s.json"})",
        R"({"allOf": [{"type": "object"}, {"required": ["a"]}]})",
        R"({"type": "object", "patternProperties": {"^x": {"type": "string"}}})",
        R"({"anyOf": [{"type": "string"}, {"not": {"type": "null"}}]})"}) {
    const absl::Status s = CheckJsonSchemaEnforced(schema);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << schema;
  }
  EXPECT_THAT(std::string(CheckJsonSchemaEnforced(R"({"minimum": 1})").message()),
              ::testing::HasSubstr("'minimum' needs a 'type'"));
  for (const char* schema :
       {R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}, "s": )"
        R"({"type": "string", "maxLength": 8, "pattern": "^[a-z]+$"}}, "required": ["n"]})",
        R"({"$defs": {"p": {"type": "string"}}, "$ref": "#/$defs/p"})",
        R"({"type": "array", "uniqueItems": false, "items": {"enum": [1, 2]}})",
        R"({"oneOf": [{"type": "string"}, {"type": "integer"}]})", "true", "not json"}) {
    EXPECT_TRUE(CheckJsonSchemaEnforced(schema).ok()) << schema;
  }
  // Tool parameters inside a structural tag are held to the same rules.
  EXPECT_EQ(
      CheckStructuralTagSchemas(
          R"({"format": {"type": "tag", "begin": "<", "end": ">", "content": )"
          R"({"type": "json_schema", "json_schema": {"type": "array", "uniqueItems": true}}}})")
          .code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pdserve
