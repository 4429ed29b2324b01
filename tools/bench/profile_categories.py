"""Groups `perf report --sort symbol --stdio` lines (stdin) into the parts
of a forward pass and prints each part's share, model loading apart.

Used by tools/bench/profile-prefill.sh; a symbol goes to the first category
whose pattern it matches."""
import re
import sys

CATEGORIES = [
    ("model load", r"Pack(Q|Block|edMatrix|edModel)|Tokenizer::Init|Gguf|gguf|Model::Load"
                   r"|clear_page|do_anonymous_page|memcg|folio|filemap|madvise"),
    ("matmul Q5_0", r"Q5_0"),
    ("matmul Q4_K", r"Q4_K|Q4Or5K"),
    ("matmul Q6_K", r"Q6_K"),
    ("matmul Q8_0", r"Q8_0"),
    ("matmul Q4_1", r"Q4_1"),
    ("matmul (other)", r"Matmul::Run|RunPacked|RunRows|RunUnits|PackedGemm"),
    ("quantise activations", r"QuantizeRow|QuantizeBlock|FillBlockScalars|Matmul::Quantize"),
    ("attention", r"AttendRows|AttendTile|Attention|Scores|Softmax|FmaValues|FmaSlot"
                  r"|WeightedValues|ReduceLanes|AttnDot|AttnAxpy|RowOffsets"),
    ("norms, RoPE, activations", r"RmsNorm|ApplyRope|Gelu|Silu|AddResidual|AddBias"
                                 r"|ScaleQueries|ForRows"),
    ("KV store", r"StoreKv|AttnToF16|QuantizeKvInt8"),
    ("logits, sampling", r"ComputeLogits|Sampler|Softmax|TopK|Logprob"),
    ("threading", r"ThreadPool|pthread|futex|sched|_raw_spin|yield|WaitFor|try_to_wake"),
]


def main():
    shares = {name: 0.0 for name, _ in CATEGORIES}
    shares["other"] = 0.0
    top = []
    for line in sys.stdin:
        m = re.match(r"\s*([\d.]+)%\s+\[[.k]\]\s+(.*\S)", line)
        if not m:
            continue
        pct, sym = float(m.group(1)), m.group(2)
        sym = re.sub(r"\s+-\s+-\s*$", "", sym)
        for name, pattern in CATEGORIES:
            if re.search(pattern, sym):
                shares[name] += pct
                break
        else:
            shares["other"] += pct
        top.append((pct, sym))
    load = shares.pop("model load")
    run = sum(shares.values()) or 1.0
    print(f"| part | share of the prompt's CPU time |")
    print("|---|---|")
    for name, pct in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {100 * pct / run:.1f}% |")
    print(f"\n(model loading, left out above: {load:.1f}% of all samples)")
    print("\ntop symbols (% of all samples):")
    for pct, sym in sorted(top, reverse=True)[:12]:
        print(f"  {pct:5.1f}%  {sym[:100]}")


if __name__ == "__main__":
    main()
