#!/usr/bin/env python3
"""Tool calling through the router's OpenAI API, as the official `openai` SDK uses it.

Drives a live pdserve cluster serving a model whose chat template calls tools
(Qwen2.5): a forced call (tool_choice "required") and a named one, plain and
streamed (the streamed deltas must add up to the same call), the model's own
choice ("auto"), the tool's result fed back for a final answer, "none", and
the errors a client can make. Every call must name an offered tool and carry
arguments that parse as JSON and follow the tool's parameters (checked here by
hand: the `city` string the schema requires, `unit` from its enum).

Run by tests/integration/tool_calling_test.cc with the venv set-up makes:

  $PDSERVE_OPENAI_PYTHON tests/integration/openai_tools_check.py \\
      --base-url http://127.0.0.1:PORT/v1 --model MODEL_NAME [--timeout SECONDS]

Prints one PASS/FAIL line per check and exits 1 when any check failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import openai
from openai import OpenAI

from check_report import check, run_group, summary

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a given city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the current local time in a given time zone",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string"}},
            "required": ["zone"],
        },
    },
}
TOOLS = [WEATHER, TIME]
QUESTION = [{"role": "user", "content": "What is the weather like in Paris today?"}]

def check_weather_call(name: str, call: Any) -> None:
    """One call of get_weather whose arguments follow its parameters."""
    check(f"{name}: type function", call.type == "function", repr(call.type))
    check(f"{name}: id", isinstance(call.id, str) and call.id.startswith("call_"), repr(call.id))
    check(f"{name}: names get_weather", call.function.name == "get_weather", call.function.name)
    args = json.loads(call.function.arguments)
    check(f"{name}: city is a string", isinstance(args.get("city"), str), repr(args))
    check(f"{name}: only known keys", set(args) <= {"city", "unit"}, repr(args))
    if "unit" in args:
        check(f"{name}: unit from the enum", args["unit"] in ("celsius", "fahrenheit"), repr(args))


class Checks:
    def __init__(self, client: OpenAI, model: str) -> None:
        self.client = client
        self.model = model

    def create(self, **kwargs: Any) -> Any:
        kwargs.setdefault("messages", QUESTION)
        kwargs.setdefault("tools", TOOLS)
        kwargs.setdefault("max_tokens", 64)
        return self.client.chat.completions.create(model=self.model, temperature=0, **kwargs)

    def required(self) -> None:
        r = self.create(tool_choice="required")
        choice = r.choices[0]
        check("required: finish_reason tool_calls", choice.finish_reason == "tool_calls",
              repr(choice.finish_reason))
        check("required: no content", not choice.message.content, repr(choice.message.content))
        calls = choice.message.tool_calls or []
        if check("required: at least one call", len(calls) >= 1, repr(choice.message)):
            for i, call in enumerate(calls):
                check(f"required: call {i} names a tool",
                      call.function.name in ("get_weather", "get_time"), call.function.name)
                json.loads(call.function.arguments)
            check_weather_call("required: first call", calls[0])

    def named_stream(self) -> None:
        named = {"type": "function", "function": {"name": "get_weather"}}
        whole = self.create(tool_choice=named).choices[0]
        calls = whole.message.tool_calls or []
        if not check("named: exactly one call", len(calls) == 1, repr(whole.message)):
            return
        check_weather_call("named", calls[0])
        check("named: finish_reason", whole.finish_reason == "tool_calls", repr(whole.finish_reason))
        # Streamed: the SDK's deltas, accumulated by index as clients do.
        parts: dict[int, dict[str, str]] = {}
        finish = None
        content = ""
        for chunk in self.create(tool_choice=named, stream=True):
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            content += delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
            for d in delta.tool_calls or []:
                p = parts.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
                p["id"] += d.id or ""
                if d.function is not None:
                    p["name"] += d.function.name or ""
                    p["arguments"] += d.function.arguments or ""
        check("named stream: one call at index 0", list(parts) == [0], repr(parts))
        check("named stream: no content", content == "", repr(content))
        check("named stream: finish_reason", finish == "tool_calls", repr(finish))
        if 0 in parts:
            check("named stream: same call as unstreamed",
                  parts[0]["name"] == calls[0].function.name and
                  json.loads(parts[0]["arguments"]) == json.loads(calls[0].function.arguments),
                  f"{parts[0]} vs {calls[0]}")
            check("named stream: id", parts[0]["id"].startswith("call_"), parts[0]["id"])

    def auto_and_result(self) -> None:
        # Greedy, this model calls the weather tool for this question.
        first = self.create()
        calls = first.choices[0].message.tool_calls or []
        if not check("auto: the model calls a tool", len(calls) == 1, repr(first.choices[0].message)):
            return
        check_weather_call("auto", calls[0])
        messages = list(QUESTION) + [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": calls[0].id,
             "content": json.dumps({"city": "Paris", "sky": "sunny", "celsius": 18})},
        ]
        final = self.create(messages=messages, tool_choice="none")
        choice = final.choices[0]
        check("result fed back: an answer", isinstance(choice.message.content, str) and
              choice.message.content != "", repr(choice.message))
        check("result fed back: no calls with none", not choice.message.tool_calls,
              repr(choice.message.tool_calls))
        check("result fed back: finish_reason", choice.finish_reason in ("stop", "length"),
              repr(choice.finish_reason))

    def none(self) -> None:
        r = self.create(tool_choice="none", max_tokens=16)
        check("none: no tool_calls", not r.choices[0].message.tool_calls, repr(r.choices[0].message))
        check("none: content", bool(r.choices[0].message.content), repr(r.choices[0].message))

    def errors(self) -> None:
        cases = [
            ("unknown named function",
             dict(tool_choice={"type": "function", "function": {"name": "get_news"}}), None),
            ("bad tool name", dict(tools=[{"type": "function", "function": {"name": "a b"}}]), None),
            ("tool_choice word", dict(tool_choice="always"), "tool_choice"),
            ("tools and response_format",
             dict(tool_choice="required", response_format={"type": "json_object"}), None),
        ]
        for name, kwargs, param in cases:
            try:
                self.create(**kwargs)
                check(f"error {name}: 400", False, "no error")
            except openai.BadRequestError as e:
                body = e.body if isinstance(e.body, dict) else {}
                check(f"error {name}: 400", e.status_code == 400, str(e.status_code))
                check(f"error {name}: message", bool(body.get("message")), repr(body))
                if param is not None:
                    check(f"error {name}: param", body.get("param") == param, repr(body))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key", default="unused")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    print(f"openai_tools_check: openai {openai.__version__}, {args.base_url}", flush=True)
    client = OpenAI(base_url=args.base_url, api_key=args.api_key, timeout=args.timeout,
                    max_retries=0)
    checks = Checks(client, args.model)
    run_group("required", checks.required)
    run_group("named and streamed", checks.named_stream)
    run_group("auto, then the result", checks.auto_and_result)
    run_group("none", checks.none)
    run_group("errors", checks.errors)
    client.close()
    return summary("openai_tools_check")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
