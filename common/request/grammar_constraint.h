// GrammarConstraint: what a request asks its output to conform to (OpenAI
// `response_format`, a regex, a GBNF/EBNF grammar or a structural tag for
// tool calls), as a plain value type that can travel in SamplingParams and
// across P/D without touching the grammar engine. GrammarCompiler turns it
// into a CompiledGrammar for one model's vocabulary.
//
// Hash() is FNV-1a 64 over the kind and the text: stable across processes,
// builds and machines (absl::Hash is seeded per process), so P and D agree
// on it and it can key caches. It is a cache key, not an identity: two
// constraints are equal only when operator== says so.
//
// Header-only, no XGrammar types. Immutable value; safe to share between
// threads like any const object.
#ifndef PDSERVE_COMMON_REQUEST_GRAMMAR_CONSTRAINT_H_
#define PDSERVE_COMMON_REQUEST_GRAMMAR_CONSTRAINT_H_

#include <cstdint>
#include <string>
#include <utility>

namespace pdserve {

// The numeric values are hashed: append new kinds, never renumber.
enum class GrammarKind : uint8_t {
  kJsonObject = 0,     // any JSON object/value (response_format json_object); text empty
  kJsonSchema = 1,     // text: a JSON Schema document
  kRegex = 2,          // text: a regular expression the whole output must match
  kEbnf = 3,           // text: XGrammar EBNF (a superset of llama.cpp GBNF), root rule `root`
  kStructuralTag = 4,  // text: XGrammar structural-tag JSON (tool calls)
};

// A C string: Debian's abseil has its own string_view, which StrCat takes.
inline const char* GrammarKindName(GrammarKind kind) {
  switch (kind) {
    case GrammarKind::kJsonObject:
      return "json_object";
    case GrammarKind::kJsonSchema:
      return "json_schema";
    case GrammarKind::kRegex:
      return "regex";
    case GrammarKind::kEbnf:
      return "ebnf";
    case GrammarKind::kStructuralTag:
      return "structural_tag";
  }
  return "unknown";
}

struct GrammarConstraint {
  GrammarKind kind = GrammarKind::kJsonObject;
  std::string text;

  static GrammarConstraint JsonObject() { return {GrammarKind::kJsonObject, ""}; }
  static GrammarConstraint JsonSchema(std::string schema) {
    return {GrammarKind::kJsonSchema, std::move(schema)};
  }
  static GrammarConstraint Regex(std::string regex) {
    return {GrammarKind::kRegex, std::move(regex)};
  }
  static GrammarConstraint Ebnf(std::string grammar) {
    return {GrammarKind::kEbnf, std::move(grammar)};
  }
  static GrammarConstraint StructuralTag(std::string json) {
    return {GrammarKind::kStructuralTag, std::move(json)};
  }

  // FNV-1a 64 of (kind byte, text bytes). Stable; see the file comment.
  uint64_t Hash() const {
    uint64_t h = 0xcbf29ce484222325ull;
    auto add = [&h](uint8_t b) { h = (h ^ b) * 0x100000001b3ull; };
    add(static_cast<uint8_t>(kind));
    for (char c : text) add(static_cast<uint8_t>(c));
    return h;
  }

  friend bool operator==(const GrammarConstraint& a, const GrammarConstraint& b) {
    return a.kind == b.kind && a.text == b.text;
  }
  friend bool operator!=(const GrammarConstraint& a, const GrammarConstraint& b) {
    return !(a == b);
  }
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_REQUEST_GRAMMAR_CONSTRAINT_H_
