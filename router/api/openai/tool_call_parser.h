// ToolCallParser: reads a chat answer for the tool calls the model wrote
// in the Hermes format of its chat template (hermes_tool_format.h),
//   <tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>
// and splits it, as it streams in, into plain content and calls (a name
// and the arguments as JSON text, with a fresh "call_..." id each).
//
// Small models often drop the markers and answer with the bare object
// alone, or in a Markdown code fence; an answer that is exactly one
// {"name": ..., "arguments": {...}} naming one of the offered tools (fenced
// or not) is read as that call too, as llama-server's Hermes parser does.
// An answer that starts with "{" or "`" is therefore held until it ends.
//
// Text that may still turn out to open a call is held back until it is
// known; whitespace between and around calls is not content. A block that
// does not parse as a call (or an unfinished one when the answer ends) is
// given back as content, verbatim, as llama-server and vLLM do.
//
// One per answer; not thread-safe.
#ifndef PDSERVE_ROUTER_API_OPENAI_TOOL_CALL_PARSER_H_
#define PDSERVE_ROUTER_API_OPENAI_TOOL_CALL_PARSER_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pdserve::router::openai {

class ToolCallParser {
 public:
  // `tool_names`: the offered tools, which a bare call must name.
  explicit ToolCallParser(std::vector<std::string> tool_names = {})
      : tool_names_(std::move(tool_names)) {}

  struct Call {
    std::string id;
    std::string name;
    std::string arguments;  // a JSON object, as text
  };
  // What may be released to the client so far.
  struct Output {
    std::string content;
    std::vector<Call> calls;
  };

  // The next piece of the answer's text.
  Output Feed(std::string_view text);
  // The answer ended: everything still held.
  Output Finish();

  // Calls found so far.
  int calls() const { return calls_; }

 private:
  void Release(std::string_view content, Output* out);
  void EndCall(std::string_view body, Output* out);

  // The answer so far is one bare JSON object that may be a call.
  bool MayBeBareCall() const;

  const std::vector<std::string> tool_names_;
  std::string pending_;            // not yet released
  bool released_ = false;          // some content or a call was released
  bool bare_ = false;              // the answer began with "{": held to its end
  bool inside_ = false;            // pending_ is the body of an open call
  std::string held_space_;         // whitespace that is content only if more follows
  std::string space_before_call_;  // held_space_ when the open call began
  bool after_call_ = false;        // no content since the last call
  int calls_ = 0;
};

}  // namespace pdserve::router::openai

#endif  // PDSERVE_ROUTER_API_OPENAI_TOOL_CALL_PARSER_H_
