#!/usr/bin/env python3
"""Speculative decoding, pdserve against llama.cpp, on prompts that copy and
one that does not, in one run on one machine.

For each workload (a chat message: a code edit, a summary that quotes its
source, a conversation asked to restate an earlier answer, and a story with
nothing to copy) it measures single-stream greedy decode:
  pdserve     `pdserve run --speculative=false` and `=true` (prompt lookup,
              docs/ARCHITECTURE.md "Engine"); the ids must be identical
  llama.cpp   llama-cpp-python's create_chat_completion plain and with its
              prompt-lookup draft model (LlamaPromptLookupDecoding), the
              speculative mode llama-cpp-python exposes
Decode rate = (tokens - 1) / (time of the last token - time of the first),
so prompt processing is not in it. Prints a markdown table.

Run with a Python that has llama-cpp-python (scripts/bench-speculative.sh).
"""
import argparse
import json
import re
import signal
import subprocess
import threading
import time
import urllib.request

FUNC = """def compute_{i}(data, factor):
    {v} = 0
    for x in data:
        if x > factor:
            {v} += x * factor
        else:
            {v} -= x
    return {v}
"""
NAMES = ["total", "count", "items", "value", "result", "index", "buffer", "score",
         "weight", "offset", "limit", "cursor"]

PASSAGE = (
    "The lighthouse at Kessock Point was built in 1871 from granite quarried on the far shore. "
    "Its light, a fixed white beam, could be seen eighteen miles out on a clear night. "
    "For forty years the same family kept it: first Angus Munro, then his daughter Isla, who "
    "logged every ship that passed and every storm that struck. In the winter of 1894 a gale "
    "tore the lantern glass away, and Isla kept a paraffin lamp burning in the gallery for "
    "nine nights until the glaziers could cross. The board of commissioners later wrote that "
    "no vessel was lost on that coast in all the years of her keeping. The light was automated "
    "in 1961, and the keeper's cottage became a small museum of charts, logbooks and lamps.")

ANSWER = (
    "To set up the project: 1. Install Python 3.11 and create a virtual environment with "
    "`python3 -m venv .venv`. 2. Activate it with `source .venv/bin/activate`. 3. Install the "
    "dependencies with `pip install -r requirements.txt`. 4. Copy `config.example.yaml` to "
    "`config.yaml` and set `database_url` to your PostgreSQL instance. 5. Run the migrations "
    "with `python manage.py migrate`. 6. Start the server with `python manage.py runserver "
    "0.0.0.0:8000` and open http://localhost:8000 in a browser.")


def workloads():
    code = "\n".join(FUNC.format(i=i, v=v) for i, v in enumerate(NAMES))
    return [
        ("code edit", "Rewrite the following Python code, renaming the parameter `data` to "
                      "`values` everywhere. Output only the code.\n\n```python\n" + code + "```"),
        ("summary with quotes", "Summarise this text in five sentences, quoting its key "
                                "sentences word for word.\n\n" + PASSAGE),
        ("restated answer", "Earlier in our conversation you answered:\n\n" + ANSWER +
                            "\n\nRepeat that answer exactly, then add a step 7 about running "
                            "the tests."),
        ("nothing to copy", "Write a long, imaginative story about a lighthouse keeper who "
                            "discovers a strange signal from the sea. Use vivid, varied "
                            "language."),
    ]


def run_pdserve(binary, model, prompt, max_tokens, threads, speculative):
    out = subprocess.run(
        [binary, "run", "--model", model, "--chat", "--prompt", prompt, "--max_tokens",
         str(max_tokens), "--threads", str(threads), f"--speculative={str(speculative).lower()}",
         "--print_token_ids"], capture_output=True, text=True, check=True)
    ids = out.stdout.split()
    m = re.search(r"(\d+) tokens in (\d+) steps, decode ([\d.]+) tokens/s; drafts: (\d+) of (\d+)",
                  out.stderr)
    return {"ids": ids, "steps": int(m.group(2)), "rate": float(m.group(3)),
            "kept": int(m.group(4)), "drafted": int(m.group(5))}


def run_llama(llm, prompt, max_tokens):
    times, text = [], []
    for chunk in llm.create_chat_completion(
            messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
            temperature=0.0, stream=True):
        piece = chunk["choices"][0]["delta"].get("content")
        if piece:
            times.append(time.perf_counter())
            text.append(piece)
    rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
    return {"text": "".join(text), "rate": rate, "chunks": len(times)}


def stream_chat(port, prompt, max_tokens):
    """One streamed chat completion over the OpenAI API; the arrival time of
    every content chunk."""
    body = json.dumps({"messages": [{"role": "user", "content": prompt}],
                       "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    times, tokens = [], 0
    with urllib.request.urlopen(req, timeout=600) as resp:
        for line in resp:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            doc = json.loads(line[6:])
            if doc.get("usage"):
                tokens = doc["usage"]["completion_tokens"]
            choices = doc.get("choices") or [{}]
            if choices[0].get("delta", {}).get("content"):
                times.append(time.perf_counter())
    return times, tokens


def serve_batch(binary, model, prompt, max_tokens, threads, batch, speculative):
    """`batch` copies of the prompt at once through `pdserve up` (one
    prefill and one decode worker): aggregate decode tokens/s and the median
    inter-token gap."""
    port = 18000 + (1 if speculative else 0)
    cmd = [binary, "up", "--model", model, "--threads", str(threads), "--router_port", "0",
           "--http_listen", f"127.0.0.1:{port}", f"--speculative={str(speculative).lower()}",
           "--log_dir", f"/tmp/pdserve-bench-spec-{port}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        results = [None] * batch

        def one(i):
            results[i] = stream_chat(port, prompt, max_tokens)

        workers = [threading.Thread(target=one, args=(i,)) for i in range(batch)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    # Tokens after each stream's first, over the time from the first of
    # them to the last; a chunk may carry several tokens, so the gaps are
    # what a client sees between chunks.
    first = min(t[0] for t, _ in results)
    last = max(t[-1] for t, _ in results)
    after = sum(n - 1 for _, n in results)
    gaps = sorted(b - a for t, _ in results for a, b in zip(t, t[1:]))
    return after / (last - first), 1000 * gaps[len(gaps) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--pdserve", default="build/bin/pdserve")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max_tokens", type=int, default=400)
    ap.add_argument("--draft", type=int, default=10,
                    help="llama.cpp prompt lookup: tokens drafted per step")
    ap.add_argument("--batch", type=int, default=8,
                    help="concurrent copies of each prompt through `pdserve up` (0 = skip)")
    ap.add_argument("--json")
    args = ap.parse_args()

    import llama_cpp
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    def llama(draft):
        return llama_cpp.Llama(
            model_path=args.model, n_ctx=4096, n_threads=args.threads,
            n_threads_batch=args.threads, verbose=False,
            logits_all=draft,  # its draft verification reads every row
            draft_model=LlamaPromptLookupDecoding(num_pred_tokens=args.draft) if draft else None)

    plain, lookup = llama(False), llama(True)
    rows = []
    for name, prompt in workloads():
        off = run_pdserve(args.pdserve, args.model, prompt, args.max_tokens, args.threads, False)
        on = run_pdserve(args.pdserve, args.model, prompt, args.max_tokens, args.threads, True)
        lp = run_llama(plain, prompt, args.max_tokens)
        ll = run_llama(lookup, prompt, args.max_tokens)
        batch = {}
        if args.batch > 0:
            for spec in (False, True):
                batch[spec] = serve_batch(args.pdserve, args.model, prompt, args.max_tokens,
                                          args.threads, args.batch, spec)
        rows.append({
            "batch": {str(k): v for k, v in batch.items()},
            "workload": name, "tokens": len(on["ids"]), "identical": off["ids"] == on["ids"],
            "pdserve_off": off["rate"], "pdserve_on": on["rate"],
            "accepted": on["kept"] / max(1, on["drafted"]),
            "tokens_per_step": len(on["ids"]) / max(1, on["steps"]),
            "llama_off": lp["rate"], "llama_on": ll["rate"],
            "llama_identical": lp["text"] == ll["text"]})
    print(f"| workload | tokens | pdserve off | pdserve on | speed-up | kept drafts | tokens/step "
          f"| llama.cpp off | llama.cpp lookup | speed-up | same text (pdserve / llama.cpp) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['tokens']} | {r['pdserve_off']:.1f} | {r['pdserve_on']:.1f} "
              f"| {r['pdserve_on'] / r['pdserve_off']:.2f}x | {100 * r['accepted']:.0f}% "
              f"| {r['tokens_per_step']:.2f} | {r['llama_off']:.1f} | {r['llama_on']:.1f} "
              f"| {r['llama_on'] / max(1e-9, r['llama_off']):.2f}x "
              f"| {'yes' if r['identical'] else 'NO'} / {'yes' if r['llama_identical'] else 'NO'} |")
    if args.batch > 0:
        print(f"\n{args.batch} streams at once through `pdserve up` (OpenAI API, one prefill and "
              "one decode worker): decode tokens/s of all streams together, median inter-token gap")
        print("\n| workload | off tok/s | on tok/s | speed-up | off ITL p50 ms | on ITL p50 ms |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            off, on = r["batch"]["False"], r["batch"]["True"]
            print(f"| {r['workload']} | {off[0]:.1f} | {on[0]:.1f} | {on[0] / off[0]:.2f}x "
                  f"| {off[1]:.1f} | {on[1]:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
