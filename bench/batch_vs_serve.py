#!/usr/bin/env python3
"""The same OpenAI Batch job through a real `radixlm serve` (a client posting the lines in file
order with C concurrent connections) and through `radixlm batch`, alternated; medians.

  batch_vs_serve.py RADIXLM JOB.jsonl [--model M] [--kv-tokens K] [--rounds 2] [--clients 16]

Prints per run: seconds, requests/s, prompt tokens computed (the server's /metrics: prompt -
cache hits; batch: its summary) and whether the completion texts agree line by line.
"""
import argparse
import concurrent.futures
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def metrics(base):
    text = urllib.request.urlopen(base + "/metrics", timeout=30).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def post(base, url, body):
    req = urllib.request.Request(base + url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as r:
        return json.loads(r.read())


def texts(body):
    return [c.get("text", c.get("message", {}).get("content")) for c in body.get("choices", [])]


def run_serve(a, lines):
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    p = subprocess.Popen([a.radixlm, "serve", "-m", a.model, "--threads", str(a.threads), "--port", str(port),
                          "--kv-tokens", str(a.kv_tokens), "--max-concurrent", "1000"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except Exception:
                time.sleep(0.2)
        m0 = metrics(base)
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(a.clients) as ex:
            answers = list(ex.map(lambda l: post(base, l["url"], l["body"]), lines))
        seconds = time.time() - t0
        m1 = metrics(base)
    finally:
        p.terminate()
        p.wait()
    computed = (m1["radixlm_prompt_tokens_total"] - m0["radixlm_prompt_tokens_total"]) - \
               (m1["radixlm_cache_hit_tokens_total"] - m0["radixlm_cache_hit_tokens_total"])
    return seconds, computed, {l["custom_id"]: texts(b) for l, b in zip(lines, answers)}


def run_batch(a, job):
    out = tempfile.mktemp(suffix=".jsonl")
    r = subprocess.run([a.radixlm, "batch", "-m", a.model, "--threads", str(a.threads), "--kv-tokens", str(a.kv_tokens),
                        "-i", job, "-o", out, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stderr)
    s = json.loads(r.stdout)
    answers = {}
    for l in open(out):
        d = json.loads(l)
        answers[d["custom_id"]] = texts(d["response"]["body"])
    os.remove(out)
    return s["seconds"], s["computed_prompt_tokens"], answers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("radixlm")
    ap.add_argument("job")
    ap.add_argument("--model", default="random:qwen3-0.6b")
    ap.add_argument("--kv-tokens", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--clients", type=int, default=16)
    a = ap.parse_args()
    lines = [json.loads(l) for l in open(a.job) if l.strip()]
    res = {"serve": [], "batch": []}
    agree = True
    for r in range(a.rounds):
        for mode in ("serve", "batch"):
            sec, computed, answers = run_serve(a, lines) if mode == "serve" else run_batch(a, a.job)
            res[mode].append((sec, computed, answers))
            print("round %d %-5s %.1f s  %.3f req/s  computed prompt tokens %d" % (r + 1, mode, sec, len(lines) / sec, computed),
                  flush=True)
    agree = all(res["serve"][0][2][k] == res["batch"][0][2][k] for k in res["batch"][0][2])
    ms = statistics.median(x[0] for x in res["serve"])
    mb = statistics.median(x[0] for x in res["batch"])
    print(json.dumps({"serve_seconds": ms, "batch_seconds": mb, "speedup": ms / mb, "requests": len(lines),
                      "serve_computed": res["serve"][0][1], "batch_computed": res["batch"][0][1], "texts_agree": agree}))


if __name__ == "__main__":
    main()
