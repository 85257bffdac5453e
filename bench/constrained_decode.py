#!/usr/bin/env python3
"""Decode speed with and without a grammar constraint, side by side in one run (a benchmark,
not a test): `radixlm serve` on a Qwen3-vocabulary model (default random:qwen3-0.6b, 2 threads),
one request at a time, the same prompt and max_tokens; runs alternate between free text
(ignore_eos), json_object, a nested json_schema and a forced tool call, and the medians are
reported. Decode time = wall time of the request minus that of the same request with
max_tokens 1 (the prefill, measured in the same alternation).

Usage: constrained_decode.py RADIXLM [--model M] [--dtype bf16] [--threads 2] [--tokens 64] [--runs 5]
"""
import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"},
    "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"},
                                                 "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                "required": ["street", "city"]},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}},
    "scores": {"type": "array", "items": {"type": "number"}}},
    "required": ["name", "age", "address", "tags", "scores"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}]

CASES = {
    "free": {"ignore_eos": True},
    "json_object": {"response_format": {"type": "json_object"}},
    "json_schema": {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}},
    "tool_call": {"tools": TOOLS, "tool_choice": "required"},
}


def post(base, body):
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.loads(r.read())
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--model", default="random:qwen3-0.6b")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dtype", default="", help="weights dtype passed to serve (e.g. bf16)")
    args = ap.parse_args()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    base = "http://127.0.0.1:%d" % port
    cmd = [args.binary, "serve", "-m", args.model, "--port", str(port), "--threads", str(args.threads), "--no-prefix-cache"]
    if args.dtype:
        cmd += ["--dtype", args.dtype]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except Exception:  # noqa: BLE001
                time.sleep(0.2)
        rates = {k: [] for k in CASES}
        for run in range(args.runs + 1):  # run 0 warms up (grammar compiles, caches)
            for name, extra in CASES.items():
                body = dict({"messages": [{"role": "user", "content": "Describe a person."}], "seed": run, "temperature": 1.0,
                             "chat_template_kwargs": {"enable_thinking": False}}, **extra)
                t_prefill, _ = post(base, dict(body, max_tokens=1))
                t_all, out = post(base, dict(body, max_tokens=args.tokens))
                n = out["usage"]["completion_tokens"]
                if run > 0 and n > 1:
                    rates[name].append((n - 1) / max(t_all - t_prefill, 1e-9))
        cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo"], capture_output=True, text=True).stdout.strip()
        free = statistics.median(rates["free"])
        report = {"cpu": cpu.split(":", 1)[-1].strip(), "model": args.model, "dtype": args.dtype or "the file's",
                  "threads": args.threads, "max_tokens": args.tokens,
                  "decode_tok_s_median": {k: round(statistics.median(v), 2) for k, v in rates.items() if v},
                  "ratio_to_free": {k: round(statistics.median(v) / free, 3) for k, v in rates.items() if v}}
        print(json.dumps(report, indent=1))
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
