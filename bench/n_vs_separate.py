#!/usr/bin/env python3
"""n = 16 samples of one 4,096-token prompt (one request, the prompt prefilled once, the samples
decoding as a cascade group) against 16 separate concurrent requests of it, through `radixlm serve`
on random:qwen3-0.6b; 32 tokens each, alternated, 2 rounds, fresh prompts each time.
Usage: n_vs_separate.py RADIXLM"""
import json, random, socket, subprocess, sys, threading, time, urllib.request
binary = sys.argv[1]
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
base = "http://127.0.0.1:%d" % port
proc = subprocess.Popen([binary, "serve", "--model", "random:qwen3-0.6b", "--port", str(port), "--kv-tokens", "24576",
                         "--max-running", "17", "--threads", "2", "--no-scoring"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(600):
    try: urllib.request.urlopen(base + "/health", timeout=1); break
    except Exception: time.sleep(0.5)
def post(body):
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as r: return json.loads(r.read())
rng = random.Random(1)
def prompt(): return [rng.randrange(1000, 100000) for _ in range(4096)]
res = {"n16": [], "sep16": []}
try:
    for rnd in range(2):
        for mode in (["n16", "sep16"] if rnd % 2 == 0 else ["sep16", "n16"]):
            p = prompt()
            t0 = time.time()
            if mode == "n16":
                out = post({"prompt": p, "max_tokens": 32, "temperature": 0.8, "seed": 1, "n": 16})
                toks = out["usage"]["completion_tokens"]
            else:
                outs = [None] * 16
                def one(i): outs[i] = post({"prompt": p, "max_tokens": 32, "temperature": 0.8, "seed": 1 + i})
                th = [threading.Thread(target=one, args=(i,)) for i in range(16)]
                [t.start() for t in th]; [t.join() for t in th]
                toks = sum(o["usage"]["completion_tokens"] for o in outs)
            dt = time.time() - t0
            res[mode].append(dt)
            print(json.dumps({"round": rnd, "mode": mode, "seconds": round(dt, 2), "completion_tokens": toks}), flush=True)
finally:
    proc.terminate()
