#!/usr/bin/env python3
"""The hybrid prefix cache with --reference-accounting against the numbers the unmodified Marconi
simulator (ruipeterpan/marconi@0801661) reports on ../shared's synthetic trace: every request
hit rate, token hit rate (floats compared exactly) and FLOPs saved (integers) for vLLM+, SGLang+,
static alpha 0/0.5/1/2 and Marconi with bootstrap tuning (final alpha too), at 2, 4 and 8 GB.
Usage: marconi_golden_test.py RADIXLM"""
import json
import os
import subprocess
import sys

DATA = os.path.join(os.environ.get("RADIXLM_SHARED_DATA", "/nonexistent"), "traces")  # set by CMake
TRACE = os.path.join(DATA, "marconi_synthetic_trace_seed0.jsonl")
GOLDEN = os.path.join(DATA, "marconi_reference_results_seed0.json")


def simulate(radixlm, capacity, policy, alpha=None):
    cmd = [radixlm, "simulate", "--trace", TRACE, "--model", "marconi-7b", "--cache-size",
           "%dB" % int(capacity), "--policy", policy, "--reference-accounting", "--json"]
    if alpha is not None:
        cmd += ["--alpha", str(alpha)]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return out["results"] if "results" in out else [out]


def main():
    radixlm = sys.argv[1]
    if not os.path.exists(TRACE) or not os.path.exists(GOLDEN):
        print("SKIP: shared data not present (RADIXLM_SHARED_DATA)")
        return 77  # CTest's SKIP_RETURN_CODE
    golden = json.load(open(GOLDEN))
    passed = failed = 0
    for capacity, expected in golden.items():
        got = {}
        for r in simulate(radixlm, float(capacity), "vllm+,sglang+,marconi"):
            got[{"vllm+": "vllm+", "sglang+": "sglang+_v1", "marconi": "marconi_v2_autotune"}[r["policy"]]] = r
        for alpha in (0.0, 0.5, 1.0, 2.0):
            got["static_alpha_v3_%s" % alpha] = simulate(radixlm, float(capacity), "marconi-static", alpha)[0]
        for name, want in expected.items():
            r = got[name]
            checks = [("request_hit_rate", r["request_hit_rate"], want["request_hit_rate"]),
                      ("token_hit_rate", r["token_hit_rate"], want["token_hit_rate"]),
                      ("flops_saved", r["flops_saved"], want["flops_saved"])]
            if name == "marconi_v2_autotune":
                checks.append(("alpha", r["alpha"], want["eff_weight_final"]))
            for what, g, w in checks:
                if g == w:
                    passed += 1
                else:
                    failed += 1
                    print("FAIL %s GB %s %s: got %r, reference %r" % (float(capacity) / 1e9, name, what, g, w))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
