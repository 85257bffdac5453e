#!/usr/bin/env python3
"""A fleet on a real workload (issue 50; a benchmark, not a test): ../shared's SWE-agent
trajectories replayed as chat sessions (each assistant message is a turn: the request is the
history before it, max_tokens 1, so a request's latency is its time to first token) through

  one      one replica holding everything (its pool sized for the whole workload);
  rr       two replicas routed round-robin (the worst router), each with that pool, no shared store;
  rr+redis the same two replicas over one redis-server (--cache-remote).

Sessions run CLIENTS at a time, turns in order within a session; the router alternates replicas
request by request. Reported per configuration: prompt tokens, prompt tokens computed (prompt
tokens - cache hits, summed over the replicas' /metrics), hit ratio against `one`, TTFT p50/p95.

  bench/fleet_remote.py --data ../shared/data/agents/swe_agent [--model random:tiny] [--clients 2] [--json]
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from harness import free_port, metric, serve, stop  # noqa: E402


def sessions(folder):
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "*.traj"))):
        history = []
        for m in json.load(open(path)).get("history", []):
            content = m.get("content")
            if isinstance(content, list):
                content = "".join(c.get("text", "") for c in content if isinstance(c, dict))
            if not isinstance(content, str) or m.get("role") not in ("system", "user", "assistant"):
                continue
            history.append({"role": m["role"], "content": content})
        turns = [history[:i] for i, m in enumerate(history) if m["role"] == "assistant" and i > 0]
        if turns:
            out.append(turns)
    return out


def ask(base, messages):
    body = json.dumps({"messages": messages, "max_tokens": 1, "temperature": 0}).encode()
    req = urllib.request.Request(base + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
    t0 = time.time()
    with urllib.request.urlopen(req, timeout=3600) as r:
        json.loads(r.read())
    return time.time() - t0


def run(cfg, binary, model, work, all_sessions, clients, threads):
    redis = None
    args = ["-m", model, "--kv-tokens", "400000", "--max-total-tokens", "65536", "--threads", str(threads)]
    if cfg == "rr+redis":
        sock = os.path.join(work, "redis.sock")
        redis = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no",
                                  "--maxmemory", "8gb", "--maxmemory-policy", "allkeys-lru"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        args += ["--cache-remote", "unix://" + sock]
    replicas = [serve(binary, args, free_port()) for _ in range(1 if cfg == "one" else 2)]
    ttft, lock, counter = [], threading.Lock(), [0]
    queue = list(all_sessions)

    def client():
        while True:
            with lock:
                if not queue:
                    return
                turns = queue.pop(0)
            for messages in turns:
                with lock:
                    base = replicas[counter[0] % len(replicas)][1]
                    counter[0] += 1
                s = ask(base, messages)
                with lock:
                    ttft.append(s)

    workers = [threading.Thread(target=client) for _ in range(clients)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    prompt = sum(metric(b, "radixlm_prompt_tokens_total") for _, b in replicas)
    hits = sum(metric(b, "radixlm_cache_hit_tokens_total") for _, b in replicas)
    for p, _ in replicas:
        stop(p)
    if redis:
        redis.kill()
        redis.wait()
    ttft.sort()
    return {"config": cfg, "requests": len(ttft), "prompt_tokens": prompt, "computed_tokens": prompt - hits, "hit_tokens": hits,
            "ttft_p50": statistics.median(ttft), "ttft_p95": ttft[int(0.95 * (len(ttft) - 1))]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--radixlm", default=os.path.join(ROOT, "build", "src", "cli", "radixlm"))
    ap.add_argument("--model", default="random:tiny")
    ap.add_argument("--data", required=True, help="the folder of SWE-agent .traj files (the shared data set's agents/swe_agent)")
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    all_sessions = sessions(a.data)
    if not all_sessions:
        sys.exit("no SWE-agent trajectories in %s" % a.data)
    work = tempfile.mkdtemp(prefix="radixlm_fleet_")
    rows = []
    try:
        for cfg in ("one", "rr", "rr+redis"):
            rows.append(run(cfg, a.radixlm, a.model, work, all_sessions, a.clients, a.threads))
            print(json.dumps(rows[-1]) if a.json else rows[-1], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    one = rows[0]["hit_tokens"]
    print("\n| config | requests | prompt tokens | computed | hits vs one | TTFT p50 | TTFT p95 |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %d | %d | %d | %.3fx | %.3f s | %.3f s |" % (r["config"], r["requests"], r["prompt_tokens"], r["computed_tokens"],
                                                            r["hit_tokens"] / one if one else 0, r["ttft_p50"], r["ttft_p95"]))


if __name__ == "__main__":
    main()
