#!/usr/bin/env python3
"""Speculative decoding, A/B in one run: `radixlm bench --speculate MODE` for each mode, rounds
alternated (the mode order rotates every round), medians per mode and the ratio to `off`.

Each bench run decodes --gen-tokens after the prompt on a fresh engine (its prefix cache
empty), `--repeats` times, and reports the median decode tok/s, tokens per step, acceptance and
the verification cost of 1..K+1 rows measured in the same process; this script takes the
median over rounds. A benchmark, not a test.

  bench/speculate_ab.py build/src/cli/radixlm -m models/kjv-qwen3.gguf --prompt-file P.txt \
      --modes off,ngram,tree --rounds 5 [--temperature 1.0] [--json]
"""
import argparse
import json
import statistics
import subprocess
import sys


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("radixlm")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--dtype", default="")
    ap.add_argument("--prompt-file", default="")
    ap.add_argument("--prompt-tokens", type=int, default=128, help="random prompt ids when no --prompt-file")
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--modes", default="off,ngram,tree")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--draft-max", type=int, default=8)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--extra", default="", help="more radixlm bench arguments, space-separated")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    modes = a.modes.split(",")
    runs = {m: [] for m in modes}
    for r in range(a.rounds):
        for m in modes[r % len(modes):] + modes[:r % len(modes)]:
            cmd = [a.radixlm, "bench", "-m", a.model, "--threads", str(a.threads), "--speculate", m,
                   "--draft-max", str(a.draft_max), "--gen-tokens", str(a.gen_tokens), "--repeats", str(a.repeats),
                   "--temperature", str(a.temperature), "--seed", str(1000 * r), "--json"]
            cmd += ["--prompt-file", a.prompt_file] if a.prompt_file else ["--prompt-tokens", str(a.prompt_tokens)]
            if a.dtype:
                cmd += ["--dtype", a.dtype]
            cmd += a.extra.split()
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            j = json.loads(out)
            j.pop("tokens", None)
            runs[m].append(j)
            print(f"round {r + 1} {m:6s} {j['decode_tokens_per_s']:9.1f} tok/s  {j['tokens_per_step']:.2f} tokens/step  "
                  f"acceptance {j['acceptance_rate']:.2f}", file=sys.stderr)
    med = lambda xs: statistics.median(xs)
    summary = {}
    base = med([j["decode_tokens_per_s"] for j in runs["off"]]) if "off" in runs else None
    for m in modes:
        js = runs[m]
        tps = med([j["decode_tokens_per_s"] for j in js])
        summary[m] = {"decode_tokens_per_s": tps, "vs_off": tps / base if base else None,
                      "decode_tokens_per_s_rounds": [j["decode_tokens_per_s"] for j in js],
                      "tokens_per_step": med([j["tokens_per_step"] for j in js]),
                      "accepted_per_step": med([j["accepted_per_step"] for j in js]),
                      "acceptance_rate": med([j["acceptance_rate"] for j in js]),
                      "implied_speedup": med([j["implied_speedup"] for j in js]),
                      "verify_cost_ratio": js[-1]["verify_cost_ratio"],
                      "by_origin": js[-1]["by_origin"]}
    report = {"cpu": cpu_name(), "model": a.model, "dtype": a.dtype or "file", "threads": a.threads,
              "prompt": a.prompt_file or f"{a.prompt_tokens} random ids", "gen_tokens": a.gen_tokens,
              "temperature": a.temperature, "draft_max": a.draft_max, "rounds": a.rounds, "repeats": a.repeats,
              "modes": summary}
    if a.json:
        print(json.dumps(report))
        return
    print(f"{report['cpu']}, {a.threads} threads; {a.model}; prompt {report['prompt']}; {a.gen_tokens} tokens; "
          f"temperature {a.temperature}; medians of {a.rounds} alternated rounds x {a.repeats} runs")
    print(f"{'mode':6s} {'tok/s':>9s} {'vs off':>7s} {'tok/step':>9s} {'accept':>7s} {'implied':>8s}")
    for m, s in summary.items():
        vs = f"{s['vs_off']:.2f}x" if s["vs_off"] else "-"
        print(f"{m:6s} {s['decode_tokens_per_s']:9.1f} {vs:>7s} {s['tokens_per_step']:9.2f} {s['acceptance_rate']:7.2f} "
              f"{s['implied_speedup']:7.2f}x")


if __name__ == "__main__":
    main()
