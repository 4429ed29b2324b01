#!/usr/bin/env python3
"""The router's OpenAI-compatible HTTP API, as the official `openai` SDK sees it.

Proves that an unmodified OpenAI client can use a live pdserve cluster: model
listing, chat and legacy completions (plain and streamed, with usage), stop
strings, seeds, logprobs, the bearer token, the OpenAI error shape for every
kind of bad request, pdserve's own sampling extensions, and a client that hangs
up mid-stream. Greedy answers are compared with TEXT, which the C++ test
computed through gRPC Generate with the same prompt rendered as chat, so the
HTTP layer is shown to add, drop and reorder nothing.

Besides what the SDK parses (leniently: it fills in objects without
validating them), every non-streamed body and every raw SSE chunk is also
validated strictly against the SDK's own pydantic types (`created` an int,
`choices[].index` present, ...) and parsed as strict JSON (no NaN/Infinity),
so stricter clients in other languages get what they need too.

Run by the C++ integration test that started the cluster, with the venv that
scripts/setup-venv.sh makes (`make test-default` passes its interpreter as
PDSERVE_OPENAI_PYTHON):

  $PDSERVE_OPENAI_PYTHON tests/integration/openai_sdk_check.py \
      --base-url http://127.0.0.1:PORT/v1 --api-key TOKEN --model MODEL_NAME \
      --expect-greedy-text TEXT --expect-greedy-prompt PROMPT \
      --greedy-max-tokens N [--timeout SECONDS]

Prints one `PASS name: detail` / `FAIL name: detail` line per check, runs every
check even after a failure (an exception inside a group of checks is one
failure of that group), and exits 1 when any check failed, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable

import httpx
import openai
import pydantic
from openai import OpenAI
from openai.types import Completion, Model
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionContentPartTextParam,
    ChatCompletionMessageParam,
)

from check_report import check, run_group, summary

# ---------------------------------------------------------------------------
# Formatting


def short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------
# Strict shapes


def strict_json(text: str) -> Any:
    """json.loads that refuses NaN and +-Infinity, which are not JSON."""

    def reject(constant: str) -> Any:
        raise ValueError(f"non-JSON constant {constant}")

    return json.loads(text, parse_constant=reject)


def shape_problems(model: type[pydantic.BaseModel], data: Any) -> str | None:
    """Why data is not a valid `model` (one of the SDK's response types), or None."""
    try:
        model.model_validate(data, strict=True)
    except pydantic.ValidationError as e:
        return "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()[:5]
        )
    return None


def check_shape(name: str, model: type[pydantic.BaseModel], data: Any) -> bool:
    problems = shape_problems(model, data)
    return check(name, problems is None, f"not a valid {model.__name__}: {problems}" if problems else "")


def check_error_shape(
    name: str,
    response: httpx.Response,
    status: int,
    *,
    param: str | None = None,
    code: str | None = None,
) -> None:
    """The OpenAI error body: {"error": {"message", "type", "param", "code"}}."""
    check(f"{name}: HTTP {status}", response.status_code == status, f"got {response.status_code}")
    try:
        body = strict_json(response.text)
    except ValueError as e:
        check(f"{name}: JSON error body", False, f"{e}: {short(response.text)}")
        return
    error: Any = body.get("error") if isinstance(body, dict) else None
    ok = (
        isinstance(error, dict)
        and isinstance(error.get("message"), str)
        and error["message"] != ""
        and isinstance(error.get("type"), str)
        and "param" in error
        and (error["param"] is None or isinstance(error["param"], str))
        and "code" in error
        and (error["code"] is None or isinstance(error["code"], (str, int)))
    )
    check(f"{name}: OpenAI error shape", ok, short(body, 240))
    if not ok:
        return
    if param is not None:
        check(f"{name}: param", error["param"] == param, f"{error['param']!r}, want {param!r}")
    if code is not None:
        check(f"{name}: code", error["code"] == code, f"{error['code']!r}, want {code!r}")


def expect_status_error(
    name: str,
    error_class: type[openai.APIStatusError],
    status: int,
    call: Callable[[], Any],
    *,
    param: str | None = None,
    code: str | None = None,
) -> None:
    """call() must raise error_class through the SDK, with the OpenAI body."""
    try:
        result = call()
    except openai.APIStatusError as e:
        check(
            f"{name}: {error_class.__name__}",
            isinstance(e, error_class),
            f"got {type(e).__name__} (HTTP {e.status_code}): {e.message}",
        )
        check_error_shape(name, e.response, status, param=param, code=code)
        return
    check(f"{name}: {error_class.__name__}", False, f"no error, got {short(result)}")


# ---------------------------------------------------------------------------
# The checks


@dataclass
class Config:
    base_url: str
    api_key: str
    model: str
    text: str  # the greedy answer to prompt, from gRPC Generate
    prompt: str
    max_tokens: int
    timeout: float
    client: OpenAI
    http: httpx.Client  # raw HTTP with the bearer token, for what the SDK hides

    def user(
        self, content: str | list[ChatCompletionContentPartTextParam] | None = None
    ) -> list[ChatCompletionMessageParam]:
        return [{"role": "user", "content": self.prompt if content is None else content}]

    def greedy_chat(self, **kwargs: Any) -> ChatCompletion:
        """The reference request (prompt, max_tokens N, temperature 0), with kwargs changed."""
        args: dict[str, Any] = {"messages": self.user(), "max_tokens": self.max_tokens, "temperature": 0}
        args.update(kwargs)
        resp: ChatCompletion = self.client.chat.completions.create(model=self.model, **args)
        return resp


COMPLETION_PROMPT = "The capital of France is"


def check_models(cfg: Config) -> None:
    raw = cfg.client.models.with_raw_response.list()
    body = strict_json(raw.http_response.text)
    check("models: object == list", body.get("object") == "list", short(body.get("object")))
    for i, entry in enumerate(body.get("data") or []):
        check_shape(f"models: data[{i}] shape", Model, entry)
    ids = [m.id for m in raw.parse()]
    check("models: exactly the served model", ids == [cfg.model], f"{ids}")


def check_chat(cfg: Config) -> ChatCompletion:
    raw = cfg.client.chat.completions.with_raw_response.create(
        model=cfg.model, messages=cfg.user(), max_tokens=cfg.max_tokens, temperature=0
    )
    check_shape("chat: shape", ChatCompletion, strict_json(raw.http_response.text))
    resp = raw.parse()
    choice = resp.choices[0]
    check("chat: one choice", len(resp.choices) == 1, f"{len(resp.choices)}")
    check("chat: greedy text == gRPC's", choice.message.content == cfg.text,
          f"got {short(choice.message.content)}, want {short(cfg.text)}")
    check("chat: role", choice.message.role == "assistant", f"{choice.message.role!r}")
    check("chat: finish_reason", choice.finish_reason in ("length", "stop"), f"{choice.finish_reason!r}")
    check_usage("chat", resp.usage, cfg.max_tokens)
    check("chat: id", resp.id.startswith("chatcmpl-"), f"{resp.id!r}")
    check("chat: object", resp.object == "chat.completion", f"{resp.object!r}")
    check("chat: model", resp.model == cfg.model, f"{resp.model!r}")
    check("chat: created", isinstance(resp.created, int) and resp.created > 1_600_000_000,
          f"{resp.created!r}")
    return resp


def check_usage(name: str, usage: Any, max_tokens: int) -> None:
    if not check(f"{name}: usage present", usage is not None):
        return
    check(f"{name}: usage.prompt_tokens > 0", usage.prompt_tokens > 0, f"{usage.prompt_tokens}")
    check(f"{name}: usage.completion_tokens <= max_tokens",
          0 <= usage.completion_tokens <= max_tokens, f"{usage.completion_tokens}")
    check(f"{name}: usage.total_tokens", usage.total_tokens == usage.prompt_tokens + usage.completion_tokens,
          f"{usage.total_tokens} = {usage.prompt_tokens} + {usage.completion_tokens}")


def check_max_completion_tokens(cfg: Config) -> None:
    # The SDK's documented name for max_tokens on chat (max_tokens is deprecated there).
    resp = cfg.client.chat.completions.create(
        model=cfg.model, messages=cfg.user(), max_completion_tokens=cfg.max_tokens, temperature=0
    )
    check("chat max_completion_tokens: same text", resp.choices[0].message.content == cfg.text,
          short(resp.choices[0].message.content))


def check_chat_stream(cfg: Config, reference: ChatCompletion | None) -> None:
    chunks = list(cfg.client.chat.completions.create(
        model=cfg.model, messages=cfg.user(), max_tokens=cfg.max_tokens, temperature=0,
        stream=True, stream_options={"include_usage": True},
    ))
    if not check("chat stream: chunks", len(chunks) >= 2, f"{len(chunks)}"):
        return
    with_choices = [c for c in chunks if c.choices]
    text = "".join(c.choices[0].delta.content or "" for c in with_choices)
    check("chat stream: deltas == greedy text", text == cfg.text, f"got {short(text)}")
    first = with_choices[0].choices[0].delta if with_choices else None
    check("chat stream: first delta role", first is not None and first.role == "assistant",
          f"{first.role if first else None!r}")
    finishes = [c.choices[0].finish_reason for c in with_choices if c.choices[0].finish_reason]
    check("chat stream: exactly one finish_reason", len(finishes) == 1, f"{finishes}")
    if reference is not None:
        check("chat stream: finish_reason as unstreamed",
              finishes[-1:] == [reference.choices[0].finish_reason], f"{finishes}")
    last = chunks[-1]
    check("chat stream: last chunk has no choices", last.choices == [], short(last.choices))
    check("chat stream: last chunk has usage", last.usage is not None, short(last.usage))
    if last.usage is not None and reference is not None and reference.usage is not None:
        check("chat stream: usage as unstreamed",
              (last.usage.prompt_tokens, last.usage.completion_tokens)
              == (reference.usage.prompt_tokens, reference.usage.completion_tokens),
              f"{last.usage.prompt_tokens}+{last.usage.completion_tokens}")
    check("chat stream: usage only on the last chunk",
          all(c.usage is None for c in chunks[:-1]))
    objects = {c.object for c in chunks}
    check("chat stream: object", objects == {"chat.completion.chunk"}, f"{objects}")
    ids = {c.id for c in chunks}
    check("chat stream: one id", len(ids) == 1 and next(iter(ids)).startswith("chatcmpl-"), f"{ids}")
    check("chat stream: model", {c.model for c in chunks} == {cfg.model})


def sse_events(response: httpx.Response) -> list[str]:
    """The data fields of a server-sent event stream, in order."""
    events: list[str] = []
    data: list[str] = []
    for line in response.iter_lines():
        if line == "":
            if data:
                events.append("\n".join(data))
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        events.append("\n".join(data))
    return events


def check_chat_stream_raw(cfg: Config) -> None:
    body = {"model": cfg.model, "messages": cfg.user(), "max_tokens": cfg.max_tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    with cfg.http.stream("POST", "/chat/completions", json=body) as response:
        check("raw stream: HTTP 200", response.status_code == 200, f"{response.status_code}")
        ctype = response.headers.get("content-type", "")
        check("raw stream: text/event-stream", ctype.startswith("text/event-stream"), ctype)
        events = sse_events(response)
    check("raw stream: ends with [DONE]", events[-1:] == ["[DONE]"], short(events[-1:]))
    chunks = events[:-1] if events[-1:] == ["[DONE]"] else events
    bad = []
    for i, event in enumerate(chunks):
        try:
            problems = shape_problems(ChatCompletionChunk, strict_json(event))
        except ValueError as e:
            problems = str(e)
        if problems:
            bad.append(f"chunk {i}: {problems}")
    check("raw stream: every chunk strict JSON and a valid ChatCompletionChunk", not bad, "; ".join(bad[:3]))


def check_content_parts(cfg: Config) -> None:
    parts: list[ChatCompletionContentPartTextParam] = [{"type": "text", "text": cfg.prompt}]
    resp = cfg.greedy_chat(messages=cfg.user(parts))
    check("chat content parts: same text as string content",
          resp.choices[0].message.content == cfg.text, short(resp.choices[0].message.content))


def check_completions(cfg: Config) -> None:
    raw = cfg.client.completions.with_raw_response.create(
        model=cfg.model, prompt=COMPLETION_PROMPT, max_tokens=8, temperature=0)
    check_shape("completions: shape", Completion, strict_json(raw.http_response.text))
    resp = raw.parse()
    text = resp.choices[0].text
    check("completions: object", resp.object == "text_completion", f"{resp.object!r}")
    check("completions: id", resp.id.startswith("cmpl-"), f"{resp.id!r}")
    check("completions: model", resp.model == cfg.model, f"{resp.model!r}")
    check("completions: text", text != "", short(text))
    check("completions: finish_reason", resp.choices[0].finish_reason in ("length", "stop"),
          f"{resp.choices[0].finish_reason!r}")
    check_usage("completions", resp.usage, 8)

    chunks = list(cfg.client.completions.create(
        model=cfg.model, prompt=COMPLETION_PROMPT, max_tokens=8, temperature=0, stream=True))
    streamed = "".join(c.choices[0].text for c in chunks if c.choices)
    check("completions stream: same text", streamed == text, f"got {short(streamed)}")
    check("completions stream: object", {c.object for c in chunks} == {"text_completion"},
          f"{ {c.object for c in chunks} }")
    ids = {c.id for c in chunks}
    check("completions stream: one id", len(ids) == 1 and next(iter(ids)).startswith("cmpl-"), f"{ids}")
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    check("completions stream: exactly one finish_reason", len(finishes) == 1, f"{finishes}")

    tokens = [504, 3575, 282]  # any ids in SmolLM2's 49152-token vocabulary
    by_ids = cfg.client.completions.create(model=cfg.model, prompt=tokens, max_tokens=8, temperature=0)
    check("completions token-id prompt: text", by_ids.choices[0].text != "", short(by_ids.choices[0].text))
    if by_ids.usage is not None:
        check("completions token-id prompt: prompt_tokens", by_ids.usage.prompt_tokens >= len(tokens),
              f"{by_ids.usage.prompt_tokens}")


def pick_stop(text: str) -> str | None:
    """A word of text whose first occurrence starts at character 5 or later."""
    for match in re.finditer(r"[A-Za-z]{2,}", text):
        if text.find(match.group()) >= 5:
            return match.group()
    if len(text) >= 8:
        middle = text[len(text) // 2: len(text) // 2 + 2]
        if text.find(middle) >= 5:
            return middle
    return None


def check_stop(cfg: Config) -> None:
    stop = pick_stop(cfg.text)
    if not check("stop: a stop string in the greedy text", stop is not None, f"{stop!r} in {short(cfg.text)}"):
        return
    assert stop is not None
    want = cfg.text[: cfg.text.find(stop)]
    for form, value in (("list", [stop]), ("string", stop)):
        resp = cfg.greedy_chat(stop=value)
        got = resp.choices[0].message.content
        check(f"stop ({form}): text cut before it", got == want, f"got {short(got)}, want {short(want)}")
        check(f"stop ({form}): finish_reason", resp.choices[0].finish_reason == "stop",
              f"{resp.choices[0].finish_reason!r}")
    chunks = list(cfg.client.chat.completions.create(
        model=cfg.model, messages=cfg.user(), max_tokens=cfg.max_tokens, temperature=0,
        stop=[stop], stream=True))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    check("stop (stream): no part of the stop string streamed", streamed == want, f"got {short(streamed)}")
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    check("stop (stream): finish_reason", finishes == ["stop"], f"{finishes}")


def check_seed(cfg: Config) -> None:
    def sample(seed: int) -> str:
        resp = cfg.client.chat.completions.create(
            model=cfg.model, messages=cfg.user(), max_tokens=16, temperature=1.0, top_p=1, seed=seed)
        return resp.choices[0].message.content or ""

    first, again, other = sample(1234), sample(1234), sample(4321)
    check("seed: same seed, same text", first == again, f"{short(first)} / {short(again)}")
    print(f"info seed: seed 4321 {'differs' if other != first else 'gives the same text'}: {short(other)}")


def check_chat_logprobs(cfg: Config) -> None:
    resp = cfg.greedy_chat(logprobs=True, top_logprobs=3)
    choice = resp.choices[0]
    content = choice.message.content or ""
    check("chat logprobs: greedy text", content == cfg.text, short(content))
    entries = choice.logprobs.content if choice.logprobs is not None else None
    if not check("chat logprobs: logprobs.content present", entries is not None, short(choice.logprobs)):
        return
    assert entries is not None
    if resp.usage is not None:
        # usage counts the end-of-generation token the model produced (as
        # gRPC's Finished.usage does); it has no text, so no entry.
        eos = 1 if choice.finish_reason == "stop" else 0
        check("chat logprobs: one entry per output token",
              len(entries) in (resp.usage.completion_tokens, resp.usage.completion_tokens - eos),
              f"{len(entries)} entries, {resp.usage.completion_tokens} tokens")
    problems: list[str] = []
    for i, e in enumerate(entries):
        problems += [f"[{i}] {p}" for p in token_logprob_problems(e)]
    check("chat logprobs: every entry well formed and greedy", not problems, "; ".join(problems[:4]))
    joined = "".join(e.token for e in entries)
    check("chat logprobs: tokens join to the content", joined == content, short(joined))
    joined_bytes = b"".join(bytes(e.bytes or []) for e in entries)
    check("chat logprobs: bytes join to the content", joined_bytes == content.encode(), short(joined_bytes))


def token_logprob_problems(entry: Any) -> list[str]:
    problems = []
    if not isinstance(entry.token, str):
        problems.append(f"token {entry.token!r}")
    if not (isinstance(entry.logprob, (int, float)) and math.isfinite(entry.logprob) and entry.logprob <= 0):
        problems.append(f"logprob {entry.logprob!r}")
    if not (isinstance(entry.bytes, list) and all(isinstance(b, int) and 0 <= b < 256 for b in entry.bytes)):
        problems.append(f"bytes {entry.bytes!r}")
    top = entry.top_logprobs or []
    values = [t.logprob for t in top]
    if len(top) != 3:
        problems.append(f"{len(top)} top_logprobs")
    elif values != sorted(values, reverse=True):
        problems.append(f"top_logprobs not descending {values}")
    elif not (math.isclose(values[0], entry.logprob, rel_tol=1e-6, abs_tol=1e-6) and top[0].token == entry.token):
        problems.append(f"top_logprobs[0] {top[0].token!r} {values[0]} is not the chosen {entry.token!r} {entry.logprob}")
    return problems


def check_completion_logprobs(cfg: Config) -> None:
    resp = cfg.client.completions.create(
        model=cfg.model, prompt=COMPLETION_PROMPT, max_tokens=8, temperature=0, logprobs=2)
    choice = resp.choices[0]
    lp = choice.logprobs
    if not check("completions logprobs: present", lp is not None):
        return
    assert lp is not None
    present = all(x is not None for x in (lp.tokens, lp.token_logprobs, lp.top_logprobs, lp.text_offset))
    if not check("completions logprobs: tokens, token_logprobs, top_logprobs, text_offset", present, short(lp)):
        return
    n = len(lp.tokens or [])
    lengths = [len(x or []) for x in (lp.tokens, lp.token_logprobs, lp.top_logprobs, lp.text_offset)]
    check("completions logprobs: equal lengths", n > 0 and lengths == [n] * 4, f"{lengths}")
    check("completions logprobs: tokens join to the text", "".join(lp.tokens or []) == choice.text,
          short(lp.tokens))
    check("completions logprobs: token_logprobs <= 0 and finite",
          all(math.isfinite(v) and v <= 0 for v in lp.token_logprobs or []), short(lp.token_logprobs))
    check("completions logprobs: 2 alternatives per token",
          all(isinstance(d, dict) and len(d) == 2 for d in lp.top_logprobs or []), short(lp.top_logprobs))
    greedy_top = all(
        d and math.isclose(max(d.values()), v, rel_tol=1e-6, abs_tol=1e-6)
        for d, v in zip(lp.top_logprobs or [], lp.token_logprobs or []))
    check("completions logprobs: chosen token is the top one", greedy_top)
    offsets, tokens = lp.text_offset or [], lp.tokens or []
    steps_ok = all(offsets[i + 1] - offsets[i] == len(tokens[i]) for i in range(len(offsets) - 1))
    check("completions logprobs: text_offset advances by each token's length", steps_ok,
          f"{offsets} (starts at {offsets[0] if offsets else None})")


def check_auth(cfg: Config) -> None:
    wrong = OpenAI(base_url=cfg.base_url, api_key=cfg.api_key + "-wrong", timeout=cfg.timeout, max_retries=0)
    expect_status_error("auth wrong key", openai.AuthenticationError, 401,
                        lambda: wrong.chat.completions.create(model=cfg.model, messages=cfg.user(), max_tokens=1))
    with httpx.Client(base_url=cfg.base_url, timeout=cfg.timeout) as anonymous:
        response = anonymous.post("/chat/completions",
                                  json={"model": cfg.model, "messages": cfg.user(), "max_tokens": 1})
        check_error_shape("auth no key", response, 401)


def check_errors(cfg: Config) -> None:
    chat = cfg.client.chat.completions.create
    hi = cfg.user("hi")
    expect_status_error("error n=2", openai.BadRequestError, 400,
                        lambda: chat(model=cfg.model, messages=hi, max_tokens=4, n=2), param="n")
    expect_status_error("error top_logprobs=21", openai.BadRequestError, 400,
                        lambda: chat(model=cfg.model, messages=hi, max_tokens=4, logprobs=True, top_logprobs=21))
    expect_status_error("error temperature=-1", openai.BadRequestError, 400,
                        lambda: chat(model=cfg.model, messages=hi, max_tokens=4, temperature=-1))
    expect_status_error("error unknown model", openai.NotFoundError, 404,
                        lambda: chat(model="no-such-model", messages=hi, max_tokens=4), code="model_not_found")
    expect_status_error("error context length", openai.BadRequestError, 400,
                        lambda: chat(model=cfg.model, messages=cfg.user("hello " * 20000), max_tokens=4))

    response = cfg.http.post("/chat/completions", content=b'{"model":',
                             headers={"content-type": "application/json"})
    check_error_shape("error malformed JSON", response, 400)
    response = cfg.http.post("/chat/completions",
                             json={"model": cfg.model, "messages": hi, "max_tokens": "ten"})
    check_error_shape("error max_tokens a string", response, 400, param="max_tokens")
    response = cfg.http.get("/nope")
    check_error_shape("error unknown path", response, 404)


def check_extensions(cfg: Config) -> None:
    resp = cfg.greedy_chat(temperature=1.0, extra_body={"top_k": 1})
    check("extension top_k=1: greedy text at temperature 1", resp.choices[0].message.content == cfg.text,
          short(resp.choices[0].message.content))
    resp = cfg.greedy_chat(max_tokens=8, extra_body={"ignore_eos": True})
    tokens = resp.usage.completion_tokens if resp.usage is not None else None
    check("extension ignore_eos: exactly max_tokens tokens", tokens == 8, f"{tokens}")
    check("extension ignore_eos: finish_reason length", resp.choices[0].finish_reason == "length",
          f"{resp.choices[0].finish_reason!r}")


def check_client_drop(cfg: Config) -> None:
    stream = cfg.client.chat.completions.create(
        model=cfg.model, messages=cfg.user(), max_tokens=200, temperature=0, stream=True,
        extra_body={"ignore_eos": True})
    received = 0
    for _ in stream:
        received += 1
        if received == 3:
            break
    stream.close()  # closes the HTTP response, and with it the connection
    check("client drop: 3 chunks, then hung up", received == 3, f"{received}")
    resp = cfg.greedy_chat()
    check("client drop: the next request is served", resp.choices[0].message.content == cfg.text,
          short(resp.choices[0].message.content))


# ---------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:PORT/v1")
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--model", required=True, help="the one model the router serves")
    greedy = parser.add_mutually_exclusive_group(required=True)
    greedy.add_argument("--expect-greedy-text",
                        help="gRPC Generate's greedy answer to the prompt rendered as chat")
    greedy.add_argument("--expect-greedy-text-file",
                        help="a file holding that answer (UTF-8, no quoting needed)")
    parser.add_argument("--expect-greedy-prompt", required=True, help="the user message of that answer")
    parser.add_argument("--greedy-max-tokens", required=True, type=int, help="its max_tokens")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per HTTP request (default 60)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.expect_greedy_text_file:
        with open(args.expect_greedy_text_file, encoding="utf-8") as f:
            args.expect_greedy_text = f.read()
    print(f"openai_sdk_check: openai {openai.__version__}, httpx {httpx.__version__}, {args.base_url}", flush=True)
    client = OpenAI(base_url=args.base_url, api_key=args.api_key, timeout=args.timeout, max_retries=0)
    http = httpx.Client(base_url=args.base_url, timeout=args.timeout,
                        headers={"Authorization": f"Bearer {args.api_key}"})
    cfg = Config(base_url=args.base_url, api_key=args.api_key, model=args.model,
                 text=args.expect_greedy_text, prompt=args.expect_greedy_prompt,
                 max_tokens=args.greedy_max_tokens, timeout=args.timeout, client=client, http=http)

    reference: list[ChatCompletion] = []
    run_group("models", lambda: check_models(cfg))
    run_group("chat", lambda: reference.append(check_chat(cfg)))
    run_group("chat max_completion_tokens", lambda: check_max_completion_tokens(cfg))
    run_group("chat stream", lambda: check_chat_stream(cfg, reference[0] if reference else None))
    run_group("raw stream", lambda: check_chat_stream_raw(cfg))
    run_group("chat content parts", lambda: check_content_parts(cfg))
    run_group("completions", lambda: check_completions(cfg))
    run_group("stop", lambda: check_stop(cfg))
    run_group("seed", lambda: check_seed(cfg))
    run_group("chat logprobs", lambda: check_chat_logprobs(cfg))
    run_group("completions logprobs", lambda: check_completion_logprobs(cfg))
    run_group("auth", lambda: check_auth(cfg))
    run_group("errors", lambda: check_errors(cfg))
    run_group("extensions", lambda: check_extensions(cfg))
    run_group("client drop", lambda: check_client_drop(cfg))  # last: the C++ test then checks KV blocks
    http.close()
    client.close()

    return summary("openai_sdk_check")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
