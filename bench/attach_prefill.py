#!/usr/bin/env python3
"""Attach to a prefix being computed (issue 29): N identical prompts submitted D ms apart to
`radixlm serve`; reports the tokens the model computed (radixlm_computed_tokens_total minus the
rows step dedup shared) against one prompt's length, and the latency of each request.

  bench/attach_prefill.py BINARY [--model random:qwen3-0.6b] [--tokens 8192] [--n 8] [--gap-ms 10]
                          [--max-tokens 4] [-- extra serve args]
"""
import argparse
import json
import os
import random
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from harness import free_port, metric, serve, stop  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--model", default="random:qwen3-0.6b")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--gap-ms", type=float, default=10)
    ap.add_argument("--max-tokens", type=int, default=4)
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    rng = random.Random(3)
    prompt = [rng.randrange(1000, 150000) for _ in range(a.tokens)]
    proc, base = serve(a.binary, ["-m", a.model, "--kv-tokens", str(a.tokens * 2 + 4096)] + a.extra, free_port())
    for _ in range(600):
        try:
            urllib.request.urlopen(base + "/health", timeout=1)
            break
        except Exception:
            time.sleep(0.2)
    latency = [0.0] * a.n
    texts = [None] * a.n

    def one(i):
        body = {"prompt": prompt, "max_tokens": a.max_tokens, "temperature": 0}
        req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        t0 = time.time()
        with urllib.request.urlopen(req, timeout=3600) as r:
            texts[i] = json.loads(r.read())["choices"][0]["text"]
        latency[i] = time.time() - t0

    threads = []
    t0 = time.time()
    for i in range(a.n):
        threads.append(threading.Thread(target=one, args=(i,)))
        threads[-1].start()
        time.sleep(a.gap_ms / 1000)
    for t in threads:
        t.join()
    wall = time.time() - t0
    computed = metric(base, "radixlm_computed_tokens_total")
    dedup = metric(base, "radixlm_deduplicated_tokens_total")
    cached = metric(base, "radixlm_cache_hit_tokens_total")
    stop(proc)
    print(json.dumps({"model": a.model, "prompt_tokens": a.tokens, "requests": a.n, "gap_ms": a.gap_ms,
                      "computed_tokens": computed, "deduplicated_tokens": dedup, "computed_minus_dedup": computed - dedup,
                      "cache_hit_tokens": cached, "ratio_to_one_prompt": (computed - dedup) / a.tokens,
                      "same_answer": len(set(texts)) == 1, "latency_s": [round(x, 2) for x in latency],
                      "wall_s": round(wall, 2)}, indent=1))


if __name__ == "__main__":
    main()
