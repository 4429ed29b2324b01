#include "common/request/sampling_proto.h"

namespace pdserve {

SamplingParams FromProto(const v1::SamplingParams& p) {
  SamplingParams s;
  if (p.has_temperature()) s.temperature = p.temperature();
  if (p.has_top_k()) s.top_k = p.top_k();
  if (p.has_top_p()) s.top_p = p.top_p();
  if (p.has_min_p()) s.min_p = p.min_p();
  if (p.has_repetition_penalty()) s.repetition_penalty = p.repetition_penalty();
  if (p.has_presence_penalty()) s.presence_penalty = p.presence_penalty();
  if (p.has_frequency_penalty()) s.frequency_penalty = p.frequency_penalty();
  if (p.has_penalty_last_n()) s.penalty_last_n = p.penalty_last_n();
  if (p.has_seed()) s.seed = p.seed();
  if (p.has_logprobs()) s.logprobs = p.logprobs();
  if (p.has_speculative()) s.speculative = p.speculative();
  const v1::Constraint& c = p.constraint();
  switch (c.kind_case()) {
    case v1::Constraint::kJsonObject:
      // false asks for nothing: free text, as if unset.
      if (c.json_object()) s.constraint = GrammarConstraint::JsonObject();
      break;
    case v1::Constraint::kJsonSchema:
      s.constraint = GrammarConstraint::JsonSchema(c.json_schema());
      break;
    case v1::Constraint::kRegex:
      s.constraint = GrammarConstraint::Regex(c.regex());
      break;
    case v1::Constraint::kEbnf:
      s.constraint = GrammarConstraint::Ebnf(c.ebnf());
      break;
    case v1::Constraint::kStructuralTag:
      s.constraint = GrammarConstraint::StructuralTag(c.structural_tag());
      break;
    case v1::Constraint::KIND_NOT_SET:
      break;
  }
  return s;
}

v1::Constraint ToProto(const GrammarConstraint& c) {
  v1::Constraint p;
  switch (c.kind) {
    case GrammarKind::kJsonObject:
      p.set_json_object(true);
      break;
    case GrammarKind::kJsonSchema:
      p.set_json_schema(c.text);
      break;
    case GrammarKind::kRegex:
      p.set_regex(c.text);
      break;
    case GrammarKind::kEbnf:
      p.set_ebnf(c.text);
      break;
    case GrammarKind::kStructuralTag:
      p.set_structural_tag(c.text);
      break;
  }
  return p;
}

v1::SamplingParams ToProto(const SamplingParams& s) {
  v1::SamplingParams p;
  p.set_temperature(s.temperature);
  p.set_top_k(s.top_k);
  p.set_top_p(s.top_p);
  p.set_min_p(s.min_p);
  p.set_repetition_penalty(s.repetition_penalty);
  p.set_presence_penalty(s.presence_penalty);
  p.set_frequency_penalty(s.frequency_penalty);
  p.set_penalty_last_n(s.penalty_last_n);
  p.set_seed(s.seed);
  // -1 (none) stays unset: the wire's "none" is the field's absence.
  if (s.logprobs >= 0) p.set_logprobs(s.logprobs);
  if (s.speculative.has_value()) p.set_speculative(*s.speculative);
  if (s.constraint.has_value()) *p.mutable_constraint() = ToProto(*s.constraint);
  return p;
}

TokenLogprobs FromProto(const v1::TokenLogprobs& p) {
  TokenLogprobs l;
  l.token = p.token();
  l.logprob = p.logprob();
  l.top.reserve(static_cast<size_t>(p.top_size()));
  for (const v1::TopLogprob& t : p.top()) l.top.push_back({t.token(), t.logprob()});
  return l;
}

v1::TokenLogprobs ToProto(const TokenLogprobs& l) {
  v1::TokenLogprobs p;
  p.set_token(l.token);
  p.set_logprob(l.logprob);
  p.mutable_top()->Reserve(static_cast<int>(l.top.size()));
  for (const TopLogprob& t : l.top) {
    v1::TopLogprob* out = p.add_top();
    out->set_token(t.token);
    out->set_logprob(t.logprob);
  }
  return p;
}

}  // namespace pdserve
