#!/usr/bin/env python3
"""Greedy-generation oracle: runs llama.cpp (via llama-cpp-python) on
SmolLM2-135M-Instruct Q4_1 and writes tests/data/golden_greedy.json.

Our engine must reproduce these tokens. The loop is the low-level one
(eval + argmax on raw logits) rather than create_completion, so that no
llama.cpp sampler, stop logic or logit post-processing sits between the
model and the recorded token. EOS/EOG is not a stop condition: every prompt
gets exactly --steps tokens so comparisons have a fixed length.

Prompts are evaluated one token per llama_decode (n_batch = n_ubatch = 1),
like the generated tokens. llama.cpp's batched prompt path multiplies the
attention matrices with llamafile's tinyBLAS instead of ggml_vec_dot_f16,
which sums in another order, so its logits differ from its own
token-by-token logits (by up to ~0.4 here); the token-by-token path is the
one with a single, documented summation order, which our engine reproduces
bit for bit on AVX512 CPUs. Each case also records how far llama.cpp's
batched prefill (n_batch = n_ubatch = 512) lands from it.

On CPUs with Intel AMX, llama.cpp's AMX kernels for Q4_1 give wrong logits
(see no_amx_preload.c), so the script re-runs itself with that shim
preloaded and refuses to write output if the model still landed in an AMX
buffer.

Usage:
  python3 tests/data/make_golden.py [--model PATH] [--out PATH] [--steps 64]
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import subprocess
import tempfile
import sys

import jinja2
import jinja2.sandbox
import llama_cpp
import numpy as np

DEFAULT_MODEL = os.path.expanduser(
    "~/.cache/pdserve/models/SmolLM2-135M-Instruct.Q4_1.gguf")
EXPECTED_SHA256 = (
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53")
EOG_IDS = (0, 2)  # <|endoftext|>, <|im_end|>
TOP_N_FIRST_STEP = 20
# One token per llama_decode. llama.cpp raises n_batch to 32 internally
# (GGML_KQ_MASK_PAD) but keeps n_ubatch = 1; llama-cpp-python's eval() splits
# prompts by its own n_batch, so every decode holds exactly one token.
# Results do not depend on n_threads (every output element is one dot
# product); 1 avoids OpenMP spin-waiting on a busy machine.
LLAMA_PARAMS = dict(n_ctx=2048, n_batch=1, n_ubatch=1, n_threads=1,
                    logits_all=False, seed=0)
# llama.cpp's default batched prompt path, only to record its discrepancy.
BATCHED_PARAMS = dict(LLAMA_PARAMS, n_batch=512, n_ubatch=512)
SHIM_ENV = "PDSERVE_NO_AMX_SHIM"

# A ~400-token passage written for this file (no copyrighted source), long
# enough to exercise multi-block KV and attention over hundreds of positions.
LONG_PASSAGE = (
    "The lighthouse at the end of the harbour had been dark for eleven years "
    "when Mara Ellison decided to repair it. Nobody in the village asked her "
    "to do it, and most people thought it was a waste of money, because ships "
    "now carried satellite receivers that told them their position to within "
    "a few metres. Still, Mara remembered the winter nights of her childhood, "
    "when the slow white beam swept across her bedroom ceiling every twelve "
    "seconds, and she believed that a harbour without a light was a harbour "
    "that had stopped expecting anyone to come home.\n\n"
    "She started in March, when the storms were weaker and the days were "
    "getting longer. The first problem was the door, which had rusted shut. "
    "She spent two afternoons with oil, a wire brush and a borrowed crowbar "
    "before the hinges finally gave way with a sound like a gull laughing. "
    "Inside, the spiral staircase was covered in sand and feathers, and the "
    "brass handrail had turned green. At the top she found the great lens "
    "intact, wrapped in canvas by someone who had clearly hoped that it would "
    "be used again.\n\n"
    "The lamp itself was another matter. The old mechanism had been designed "
    "for a kerosene burner, later converted to electricity, and the wiring "
    "looked as if it had been installed in a hurry by three different people "
    "who never spoke to each other. Mara wrote to the maritime museum in the "
    "city, and after several weeks a retired engineer named Tobias replied. "
    "He had maintained lights along this coast for thirty years, and he "
    "offered to help if she would pay for his bus ticket and feed him soup.\n\n"
    "Together they cleaned the lens, replaced the motor that turned it, and "
    "fitted a modern lamp that used a fraction of the power. Tobias insisted "
    "on keeping the original clockwork as a backup, in case the electricity "
    "failed during a storm, which he said it always did at the worst possible "
    "moment. On the first evening of June they climbed the stairs together, "
    "checked every connection twice, and switched it on. The beam moved "
    "across the water, over the roofs of the village and out toward the "
    "horizon, and down in the harbour somebody on a fishing boat sounded "
    "the horn three times.")

PLAIN_PROMPTS = [
    ("short_en_capital", "The capital of France is"),
    ("short_en_story", "Once upon a time, there was a little"),
    ("single_token", "Hello"),
    ("long_en_passage", LONG_PASSAGE + "\n\nWhat happened next was"),
    ("code_python", 'def fibonacci(n):\n    """Return the n-th Fibonacci '
                    'number."""\n'),
    ("code_cpp", "#include <vector>\n\n// Returns the sum of all elements.\n"
                 "int Sum(const std::vector<int>& values) {\n"),
    ("french_accents", "Le café était déjà fermé quand nous sommes arrivés à "
                       "la gare. Après une longue journée, nous"),
    ("german_umlauts", "Die Straße führt über die Brücke zum Schloß. Größere "
                       "Häuser stehen dort, und die Bürger"),
    ("chinese", "中国的首都是北京。北京是一座历史悠久的城市，"),
    ("russian", "Москва — столица России. Это крупнейший город страны, и"),
    ("emoji", "I love pizza 🍕 and tacos 🌮! My favourite emoji is 😀 because"),
    ("digits_whitespace", "Count: 1, 2, 3, 4, 5,\n\n\t  multiple   spaces and"
                          " 12345 digits"),
]

CHAT_PROMPTS = [
    ("chat_hello", [{"role": "user", "content": "Hello!"}]),
    ("chat_capital",
     [{"role": "user", "content": "What is the capital of France?"}]),
    ("chat_code", [{"role": "user", "content":
                    "Write a Python function that reverses a string."}]),
    ("chat_french", [{"role": "user", "content":
                      "Traduis en français : « Good morning, how are you "
                      "today? »"}]),
    ("chat_system_multi_turn", [
        {"role": "system", "content":
         "You are a concise assistant. Answer in at most two sentences."},
        {"role": "user", "content": "What is photosynthesis?"},
        {"role": "assistant", "content":
         "Photosynthesis is the process by which plants use sunlight, water "
         "and carbon dioxide to make sugar and release oxygen."},
        {"role": "user", "content": "Why is it important for animals?"},
    ]),
    # Crosses the n_batch=512 boundary, so llama.cpp prefills in two chunks.
    ("chat_long_summary", [{"role": "user", "content":
                            "Summarize the following story in three "
                            "sentences.\n\n" + LONG_PASSAGE + "\n\n" +
                            LONG_PASSAGE}]),
]


def cpu_has_amx():
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      return " amx_int8" in f.read()
  except OSError:
    return False


def reexec_without_amx():
  """Re-runs this script with no_amx_preload.so in LD_PRELOAD (once)."""
  if not cpu_has_amx() or os.environ.get(SHIM_ENV):
    return
  here = os.path.dirname(os.path.abspath(__file__))
  shim = os.path.join(tempfile.mkdtemp(prefix="pdserve_noamx_"),
                      "no_amx_preload.so")
  subprocess.run(["cc", "-O2", "-shared", "-fPIC",
                  os.path.join(here, "no_amx_preload.c"), "-o", shim, "-ldl"],
                 check=True)
  env = dict(os.environ)
  env["LD_PRELOAD"] = ":".join(x for x in (shim, env.get("LD_PRELOAD")) if x)
  env[SHIM_ENV] = shim
  os.execve(sys.executable, [sys.executable] + sys.argv, env)


def load_model(path, params):
  """Loads the model with its load log captured, to see the weight buffers."""
  with tempfile.TemporaryFile(mode="w+") as log:
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(log.fileno(), 2)
    try:
      llm = llama_cpp.Llama(model_path=path, verbose=True, **params)
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
    log.seek(0)
    buffers = [line.strip() for line in log if "model buffer size" in line]
  return llm, buffers


def sha256_of(path):
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
      h.update(chunk)
  return h.hexdigest()


def render_chat(template_text, messages):
  # Same rendering as llama-cpp-python's Jinja2ChatFormatter: the GGUF's own
  # template, so SmolLM2's default system prompt is included.
  env = jinja2.sandbox.ImmutableSandboxedEnvironment(
      loader=jinja2.BaseLoader(), trim_blocks=True, lstrip_blocks=True)
  return env.from_string(template_text).render(
      messages=messages, add_generation_prompt=True)


def last_logits(llm):
  # llama-cpp-python 0.3.7 leaves llm.scores unfilled when logits_all=False,
  # so read the context's logits for the last evaluated token directly.
  ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
  return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).copy()


def batched_prefill_logits(llm_batched, prompt_tokens):
  llm_batched.reset()
  llm_batched.eval(prompt_tokens)
  return last_logits(llm_batched)


def generate(llm, llm_batched, prompt_tokens, steps):
  llm.reset()
  llm.eval(prompt_tokens)  # one token per decode (n_batch = 1)
  out = {"output_tokens": [], "top1_logit": [], "top2_logit": [], "gap": []}
  for step in range(steps):
    logits = last_logits(llm)
    token = int(np.argmax(logits))  # first index of the max, like llama.cpp
    top2 = np.partition(logits, -2)[-2:]
    second = float(min(top2))
    if step == 0:
      order = np.argsort(-logits, kind="stable")[:TOP_N_FIRST_STEP]
      out["first_step_top20"] = [
          {"id": int(i), "logit": float(logits[i])} for i in order]
      batched = batched_prefill_logits(llm_batched, prompt_tokens)
      out["batched_prefill_max_abs_diff"] = float(
          np.max(np.abs(batched.astype(np.float64) - logits)))
      out["batched_prefill_same_argmax"] = bool(np.argmax(batched) == token)
    out["output_tokens"].append(token)
    out["top1_logit"].append(float(logits[token]))
    out["top2_logit"].append(second)
    out["gap"].append(float(logits[token]) - second)
    llm.eval([token])
  eog = [i for i, t in enumerate(out["output_tokens"]) if t in EOG_IDS]
  out["first_eog_step"] = eog[0] if eog else None
  return out


def run_case(llm, llm_batched, name, kind, text, messages, steps):
  prompt_tokens = llm.tokenize(text.encode("utf-8"), add_bos=False,
                               special=True)
  result = generate(llm, llm_batched, prompt_tokens, steps)
  case = {"name": name, "kind": kind, "text": text}
  if messages is not None:
    case["messages"] = messages
  case["prompt_tokens"] = prompt_tokens
  case.update(result)
  first_eog = result["first_eog_step"]
  visible = result["output_tokens"][:first_eog]
  case["output_text_until_eog"] = llm.detokenize(visible).decode(
      "utf-8", errors="replace")
  return case


def format_json(header, cases):
  # One field per line with compact arrays: diffs of a regenerated file stay
  # readable and the file stays small.
  def obj(d, indent):
    pad = " " * indent
    items = [f'{pad}{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}'
             for k, v in d.items()]
    return "{\n" + ",\n".join(items) + "\n" + " " * (indent - 2) + "}"
  body = ",\n".join("  " + obj(c, 4) for c in cases)
  return ('{\n"header": ' + obj(header, 2) + ',\n"cases": [\n' + body +
          "\n]\n}\n")


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  here = os.path.dirname(os.path.abspath(__file__))
  parser.add_argument("--model", default=DEFAULT_MODEL)
  parser.add_argument("--out", default=os.path.join(here, "golden_greedy.json"))
  parser.add_argument("--steps", type=int, default=64)
  parser.add_argument("--allow-amx", action="store_true",
                      help="do not disable llama.cpp's AMX kernels "
                           "(for experiments only; gives wrong logits)")
  args = parser.parse_args()
  if not args.allow_amx:
    reexec_without_amx()

  digest = sha256_of(args.model)
  if digest != EXPECTED_SHA256:
    sys.exit(f"model sha256 {digest} != expected {EXPECTED_SHA256}")
  llm, buffers = load_model(args.model, LLAMA_PARAMS)
  llm_batched, batched_buffers = load_model(args.model, BATCHED_PARAMS)
  if (any("AMX" in b for b in buffers + batched_buffers) and
      not args.allow_amx):
    sys.exit(f"weights are in an AMX buffer ({buffers}); golden unusable")
  template = llm.metadata["tokenizer.chat_template"]

  cases = []
  for name, text in PLAIN_PROMPTS:
    cases.append(run_case(llm, llm_batched, name, "plain", text, None,
                          args.steps))
  for name, messages in CHAT_PROMPTS:
    text = render_chat(template, messages)
    cases.append(run_case(llm, llm_batched, name, "chat", text, messages,
                          args.steps))

  # Re-run the first case to prove the oracle itself is deterministic.
  again = run_case(llm, llm_batched, "rerun", "plain", PLAIN_PROMPTS[0][1],
                   None, args.steps)
  if again["output_tokens"] != cases[0]["output_tokens"]:
    sys.exit("llama.cpp is not deterministic across runs; golden unusable")

  header = {
      "generator": "tests/data/make_golden.py",
      "command": "nice -n 10 python3 tests/data/make_golden.py",
      "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
      "llama_cpp_python_version": llama_cpp.__version__,
      "llama_system_info": llama_cpp.llama_print_system_info().decode(),
      "machine": platform.machine(),
      "model_file": os.path.basename(args.model),
      "model_sha256": digest,
      "llama_params": LLAMA_PARAMS,
      "prompt_eval": "token by token: one token per llama_decode "
                     "(n_batch = n_ubatch = 1), the path whose summation "
                     "order is ggml_vec_dot_f16's; llama.cpp's batched "
                     "prefill (tinyBLAS) differs from it, see "
                     "batched_prefill_max_abs_diff per case",
      "batched_params": BATCHED_PARAMS,
      "weight_buffers": buffers,
      "amx": ("disabled: tests/data/no_amx_preload.c preloaded "
              "(llama.cpp AMX Q4_1 kernels give wrong logits)"
              if os.environ.get(SHIM_ENV) else
              "not disabled (CPU without AMX, or --allow-amx)"),
      "tokenize": "llm.tokenize(text.encode(), add_bos=False, special=True)",
      "chat_template": template,
      "chat_render": "jinja2 trim_blocks+lstrip_blocks, "
                     "add_generation_prompt=True",
      "decoding": "greedy: first index of max raw logit; EOS/EOG not a "
                  "stop; llm.eval(prompt) (one token per decode) then "
                  "llm.eval([token]) per step",
      "steps": args.steps,
      "eog_ids": list(EOG_IDS),
  }
  with open(args.out, "w", encoding="utf-8") as f:
    f.write(format_json(header, cases))
  print(f"wrote {len(cases)} cases to {args.out}")


if __name__ == "__main__":
  main()
