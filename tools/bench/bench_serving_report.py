#!/usr/bin/python3
"""Turns tools/bench/bench_serving.py's results.json into the markdown tables and
PNG plots of docs/PERFORMANCE.md. Uses Debian's matplotlib (/usr/bin/python3).

  /usr/bin/python3 tools/bench/bench_serving_report.py RESULTS.json --img_dir docs/img
"""
import argparse
import json
import os
import statistics

SYSTEMS = ["disagg", "colocated", "llama-server"]
COLORS = {"disagg": "tab:blue", "colocated": "tab:orange", "llama-server": "tab:green"}


def slo_from_baselines(runs):
    """TTFT p90 x3 and TPOT p90 x1.5 over the better pdserve layout, unloaded."""
    ref = {}
    for system in ("disagg", "colocated"):
        base = [r["doc"]["summary"] for r in runs if r["system"] == system and r["rate"] == "unloaded"]
        if base:
            ref[system] = (statistics.mean(s["ttft_ms"]["p90"] for s in base),
                           statistics.mean(s["tpot_ms"]["p90"] for s in base))
    ttft = min(v[0] for v in ref.values())
    tpot = min(v[1] for v in ref.values())
    return {"ttft_ms": 3 * ttft, "tpot_ms": 1.5 * tpot, "ref": ref}


def run_metrics(doc, slo):
    s = doc["summary"]
    good = sum(1 for q in doc["requests"]
               if q["status"] == "OK" and q["ttft_ms"] is not None and q["ttft_ms"] <= slo["ttft_ms"]
               and (q["tpot_ms"] is None or q["tpot_ms"] <= slo["tpot_ms"]))
    return {
        "ttft_p50": s["ttft_ms"]["p50"], "ttft_p90": s["ttft_ms"]["p90"],
        "ttft_p99": s["ttft_ms"]["p99"], "itl_p50": s["itl_ms"]["p50"],
        "itl_p99": s["itl_ms"]["p99"], "tpot_p90": s["tpot_ms"]["p90"],
        "tok_s": s["output_token_throughput"], "req_s": s["request_throughput"],
        "goodput": good / s["duration_s"] if s["duration_s"] else 0.0,
        "good_share": good / max(1, s["completed"] + s["failed"]),
        "failed": s["failed"], "completed": s["completed"],
    }


def aggregate(runs, slo):
    """{(system, rate): {metric: (mean, min, max)}} over repeats."""
    groups = {}
    for r in runs:
        groups.setdefault((r["system"], r["rate"]), []).append(run_metrics(r["doc"], slo))
    out = {}
    for key, ms in groups.items():
        out[key] = {k: (statistics.mean(m[k] for m in ms), min(m[k] for m in ms),
                        max(m[k] for m in ms), len(ms)) for k in ms[0]}
    return out


def fmt(v, digits=0):
    mean, lo, hi, n = v
    if n > 1 and hi - lo > 0:
        return f"{mean:.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f})"
    return f"{mean:.{digits}f}"


def rates_of(runs):
    return sorted({r["rate"] for r in runs if r["rate"] != "unloaded"})


def tables(agg, runs, slo):
    lines = ["| rate (req/s) | system | TTFT p50 | TTFT p90 | TTFT p99 | ITL p50 | ITL p99 | "
             "TPOT p90 | output tok/s | goodput req/s | in SLO | failed |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rate in ["unloaded"] + rates_of(runs):
        for system in SYSTEMS:
            m = agg.get((system, rate))
            if not m:
                continue
            lines.append(
                f"| {rate} | {system} | {fmt(m['ttft_p50'])} | {fmt(m['ttft_p90'])} | "
                f"{fmt(m['ttft_p99'])} | {fmt(m['itl_p50'], 1)} | {fmt(m['itl_p99'])} | "
                f"{fmt(m['tpot_p90'], 1)} | {fmt(m['tok_s'], 1)} | {fmt(m['goodput'], 2)} | "
                f"{100 * m['good_share'][0]:.0f}% | {m['failed'][0]:.0f} |")
    lines += ["", "| rate (req/s) | colocated ITL p99 / disagg ITL p99 (goal ≥ 5) | "
              "disagg goodput / colocated goodput (goal ≥ 1.2) |", "|---|---|---|"]
    for rate in rates_of(runs):
        d, c = agg.get(("disagg", rate)), agg.get(("colocated", rate))
        if not d or not c:
            continue
        itl = c["itl_p99"][0] / d["itl_p99"][0]
        good = d["goodput"][0] / c["goodput"][0] if c["goodput"][0] > 0 else float("inf")
        lines.append(f"| {rate} | {itl:.2f}x | {good:.2f}x |")
    return "\n".join(lines)


def overhead_table(overhead):
    lines = ["| round | TTFT p50 router | TTFT p50 direct | added TTFT | ITL p50 router | "
             "ITL p50 direct | added ITL |", "|---|---|---|---|---|---|---|"]
    added_ttft, added_itl = [], []
    for i, (r, d) in enumerate(zip(overhead["router"], overhead["decode"])):
        at = r["ttft_ms"]["p50"] - d["ttft_ms"]["p50"]
        ai = r["itl_ms"]["p50"] - d["itl_ms"]["p50"]
        added_ttft.append(at)
        added_itl.append(ai)
        lines.append(f"| {i} | {r['ttft_ms']['p50']:.2f} | {d['ttft_ms']['p50']:.2f} | {at:+.2f} | "
                     f"{r['itl_ms']['p50']:.3f} | {d['itl_ms']['p50']:.3f} | {ai:+.3f} |")
    if added_ttft:
        lines.append(f"| median | | | {statistics.median(added_ttft):+.2f} | | | "
                     f"{statistics.median(added_itl):+.3f} |")
    return "\n".join(lines)


def kv_summary(agg_runs):
    """Mean KV transfer time/bytes of the disaggregated runs, per request."""
    rows = []
    for r in agg_runs:
        if r["system"] != "disagg" or r["rate"] == "unloaded":
            continue
        p = r["doc"]["summary"]["phases_mean"]
        if p["count"]:
            rows.append((p["kv_transfer_ms"], p["kv_transfer_bytes"], p["router_ttft_ms"]))
    if not rows:
        return "no disaggregated runs"
    ms = statistics.mean(x[0] for x in rows)
    by = statistics.mean(x[1] for x in rows)
    ttft = statistics.mean(x[2] for x in rows)
    return (f"mean per request over the disaggregated sweep: {by / 1e6:.2f} MB of KV, "
            f"{ms:.2f} ms on the wire after the last layer ({100 * ms / ttft:.2f}% of the mean "
            f"server TTFT {ttft:.0f} ms)")


def plot(agg, runs, meta, img_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rates = rates_of(runs)
    figs = [("itl_p99", "ITL p99 (ms)", True, "serving-itl-p99.png"),
            ("ttft_p90", "TTFT p90 (ms)", True, "serving-ttft-p90.png"),
            ("goodput", "goodput (req/s in SLO)", False, "serving-goodput.png")]
    written = []
    for key, label, log, name in figs:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for system in SYSTEMS:
            pts = [(rate, agg[(system, rate)][key]) for rate in rates if (system, rate) in agg]
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ys = [p[1][0] for p in pts]
            err = [[p[1][0] - p[1][1] for p in pts], [p[1][2] - p[1][0] for p in pts]]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=system, color=COLORS[system])
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("Poisson request rate (req/s)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        ax.set_title(f"{label} vs rate — {meta['date']}", fontsize=10)
        fig.text(0.01, 0.005, f"{meta['machine']}; bars: min–max over repeats", fontsize=6)
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        path = os.path.join(img_dir, name)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--img_dir", default="docs/img")
    args = ap.parse_args()
    with open(args.results) as f:
        res = json.load(f)
    runs, meta = res["runs"], res["meta"]
    slo = slo_from_baselines(runs)
    agg = aggregate(runs, slo)
    os.makedirs(args.img_dir, exist_ok=True)
    images = plot(agg, runs, meta, args.img_dir)
    print(f"date: {meta['date']}  \nmachine: {meta['machine']}  \ncommand: `{meta['command']}`\n")
    print(f"SLO (3x TTFT p90, 1.5x TPOT p90 of the better unloaded pdserve layout): "
          f"TTFT ≤ {slo['ttft_ms']:.0f} ms, TPOT ≤ {slo['tpot_ms']:.1f} ms\n")
    print(tables(agg, runs, slo))
    print("\nRouter overhead (closed loop, 1 in flight, 32-token prompts, 64 tokens out):\n")
    print(overhead_table(res["overhead"]))
    print("\nKV transfer: " + kv_summary(runs))
    print("\npdserve_kv_bench (same run):\n\n```\n" + res["kv_bench"] + "\n```")
    for name, why in res.get("failures", {}).items():
        print(f"\n**{name} did not complete**: {why.splitlines()[0] if why else ''}")
    print("\nplots: " + ", ".join(images))


if __name__ == "__main__":
    main()
