#!/usr/bin/env python3
"""Greedy-generation oracle for the models beyond SmolLM2: runs llama.cpp
(llama-cpp-python 0.3.36, the first version here that knows gemma3) on
Qwen2.5-Coder-0.5B-Instruct or Gemma 3 270M and writes
tests/data/golden_<model>.json, in golden_greedy.json's format.

As make_golden.py: prompts and generated tokens go one token per
llama_decode (n_batch = n_ubatch = 1), the next token is the first index of
the maximum raw logit (no sampler), EOS does not stop, and every step records
the top-1 logit and the top-2 gap. Attention is llama.cpp's non-flash path
(flash_attn=False) and the sliding-window cache holds the whole context
(swa_full=True), so a position outside a local layer's window is masked, not
evicted. On AMX CPUs the script re-runs itself with no_amx_preload.c.

Usage:
  python3 tests/data/make_model_golden.py {qwen2.5-coder|gemma3|smollm2} [--steps 64]
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import sys

import jinja2.sandbox
import llama_cpp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import (LONG_PASSAGE, format_json, load_model,  # noqa: E402
                         reexec_without_amx, sha256_of)

CACHE = os.path.expanduser("~/.cache/pdserve/models")
MODELS = {
    # SmolLM2 too, so that model_golden_test holds all three models to the
    # same llama.cpp in the same format (golden_greedy.json, make_golden.py,
    # adds its chats and batched-prefill figures).
    "smollm2": dict(
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        eog=(0, 2)),
    "qwen2.5-coder": dict(
        file="Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        eog=(151643, 151645)),
    "gemma3": dict(
        file="gemma-3-270m.Q4_K_M.gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        eog=(1, 106)),
}
LLAMA_PARAMS = dict(n_ctx=4096, n_batch=1, n_ubatch=1, n_threads=2,
                    logits_all=False, seed=0, flash_attn=False, swa_full=True)
TOP_N_FIRST_STEP = 20

# A second passage, so that long prompts pass the 512-token window of
# Gemma's local layers by a wide margin (~1,100 and ~1,600 tokens).
SECOND_PASSAGE = (
    "In the autumn the fishing boats came back later every evening, and the "
    "children of the village learned to tell them apart by the colour of "
    "their lanterns. The red one belonged to the Okafor brothers, who sang "
    "while they mended their nets; the green one to old Teodor, who never "
    "spoke to anyone but always left a fish on the step of the school. Mara "
    "watched them from the gallery of the lighthouse, counting the seconds "
    "between the flashes of her lamp and the moment each boat turned toward "
    "the harbour mouth. She kept a notebook of these crossings, with the "
    "date, the wind, the height of the swell and the name of every boat, "
    "and by the first frost she had filled three of them.\n\n")

PLAIN = [
    ("short_capital", "The capital of France is"),
    ("code_python", 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'),
    ("code_cpp", "#include <vector>\n\n// Returns the sum of all elements.\n"
                 "int Sum(const std::vector<int>& values) {\n"),
    ("french", "Le café était déjà fermé quand nous sommes arrivés à la gare. "
               "Après une longue journée, nous"),
    ("digits_whitespace", "Count: 1, 2, 3, 4, 5,\n\n\t  multiple   spaces and 12345 digits"),
    ("long_passage", LONG_PASSAGE + "\n\nWhat happened next was"),
    ("longer_passage", LONG_PASSAGE + SECOND_PASSAGE * 2 + LONG_PASSAGE +
     "\n\nThe next morning"),
    ("longest_passage", (LONG_PASSAGE + SECOND_PASSAGE) * 3 + "\n\nIn the end,"),
    ("short_story", "Once upon a time, there was a little"),
    ("german", "Die Straße führt über die Brücke zum Schloß. Größere Häuser stehen dort, "
               "und die Bürger"),
    ("chinese", "中国的首都是北京。北京是一座历史悠久的城市，"),
    ("json", '{"name": "pdserve", "version": 3, "features": ["prefill", '),
    ("recipe", "To make a simple tomato sauce, you will need"),
    ("sql", "-- Find the ten customers with the most orders\nSELECT"),
    ("list", "Three reasons to learn a second language:\n1."),
    ("window_edge", SECOND_PASSAGE * 4 + "The notebooks were"),
]
CHAT = [
    ("chat_hello", [{"role": "user", "content": "Hello!"}]),
    ("chat_code", [{"role": "user", "content":
                    "Write a Python function that reverses a string."}]),
    ("chat_system_multi_turn", [
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "What is a linked list?"},
        {"role": "assistant", "content": "A sequence of nodes, each pointing to the next."},
        {"role": "user", "content": "Show one in C."},
    ]),
]


def last_logits(llm):
  ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
  return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).copy()


def render_chat(template_text, messages, bos_token):
  env = jinja2.sandbox.ImmutableSandboxedEnvironment(
      loader=jinja2.BaseLoader(), trim_blocks=True, lstrip_blocks=True)
  return env.from_string(template_text).render(
      messages=messages, add_generation_prompt=True, bos_token=bos_token)


def generate(llm, prompt_tokens, steps, eog_ids):
  llm.reset()
  llm.eval(prompt_tokens)
  out = {"output_tokens": [], "top1_logit": [], "top2_logit": [], "gap": []}
  for step in range(steps):
    logits = last_logits(llm)
    token = int(np.argmax(logits))
    second = float(min(np.partition(logits, -2)[-2:]))
    if step == 0:
      order = np.argsort(-logits, kind="stable")[:TOP_N_FIRST_STEP]
      out["first_step_top20"] = [{"id": int(i), "logit": float(logits[i])} for i in order]
    out["output_tokens"].append(token)
    out["top1_logit"].append(float(logits[token]))
    out["top2_logit"].append(second)
    out["gap"].append(float(logits[token]) - second)
    llm.eval([token])
  eog = [i for i, t in enumerate(out["output_tokens"]) if t in eog_ids]
  out["first_eog_step"] = eog[0] if eog else None
  return out


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("model", choices=sorted(MODELS))
  parser.add_argument("--steps", type=int, default=64)
  args = parser.parse_args()
  reexec_without_amx()
  spec = MODELS[args.model]
  path = os.path.join(CACHE, spec["file"])
  digest = sha256_of(path)
  if digest != spec["sha256"]:
    sys.exit(f"model sha256 {digest} != expected {spec['sha256']}")
  llm, buffers = load_model(path, LLAMA_PARAMS)
  if any("AMX" in b for b in buffers):
    sys.exit(f"weights are in an AMX buffer ({buffers}); golden unusable")
  template = llm.metadata.get("tokenizer.chat_template")
  add_bos = llm.metadata.get("tokenizer.ggml.add_bos_token") == "true"
  bos_text = llm.detokenize([llm.token_bos()], special=True).decode()

  work = [(n, "plain", t, None) for n, t in PLAIN]
  if template:
    # The template writes BOS itself where the model wants one.
    work += [(n, "chat", render_chat(template, m, bos_text), m) for n, m in CHAT]
  cases = []
  for name, kind, text, messages in work:
    # Plain prompts get the BOS the model's metadata asks for, as our
    # Tokenizer::EncodePrompt adds it; chat text carries its own.
    tokens = llm.tokenize(text.encode(), add_bos=add_bos and kind == "plain", special=True)
    case = {"name": name, "kind": kind, "text": text}
    if messages is not None:
      case["messages"] = messages
    case["prompt_tokens"] = tokens
    case.update(generate(llm, tokens, args.steps, spec["eog"]))
    visible = case["output_tokens"][:case["first_eog_step"]]
    case["output_text_until_eog"] = llm.detokenize(visible).decode("utf-8", errors="replace")
    print(f"{name}: {len(tokens)} prompt tokens -> {case['output_text_until_eog'][:60]!r}",
          file=sys.stderr)
    cases.append(case)

  header = {
      "oracle": f"llama-cpp-python {llama_cpp.__version__}",
      "llama_cpp_system_info": llama_cpp.llama_print_system_info().decode(),
      "model": spec["file"],
      "model_sha256": digest,
      "llama_params": LLAMA_PARAMS,
      "prompt_eval": "one token per llama_decode (n_batch = n_ubatch = 1)",
      "weight_buffers": buffers,
      "add_bos_plain": add_bos,
      "machine": platform.processor() or platform.machine(),
      "generated": datetime.date.today().isoformat(),
      "command": f"python3 tests/data/make_model_golden.py {args.model} --steps {args.steps}",
  }
  out = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     f"golden_{args.model.replace('.', '_').replace('-', '_')}.json")
  with open(out, "w", encoding="utf-8") as f:
    f.write(format_json(header, cases))
  print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
  main()
