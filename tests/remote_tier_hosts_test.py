#!/usr/bin/env python3
"""Two hosts on one machine: two `radixlm serve` replicas and one redis-server, each in its own
network namespace, joined to the server's by veth pairs (10.77.1.0/24 and 10.77.2.0/24). The
test creates them and removes them; SKIPPED (77) where namespaces cannot be made (no root, no
iproute2) or redis-server is absent. Requests are sent from inside each replica's namespace.

  1. replica A computes a prompt (a PREFIX-token shared prefix and a short tail): its cold TTFT;
  2. replica B's first request on it: cached_tokens = the prefix's full blocks, the same greedy
     answer, and its TTFT against A's cold one;
  3. with --netem: `tc netem` adds 1 ms delay and a 1 Gbit/s rate on B's link; B restarted (an
     empty pool) asks again: the TTFT that follows and the load's bandwidth (bytes read from the
     remote tier / seconds admissions waited for it).

Usage: remote_tier_hosts_test.py RADIXLM [--model M] [--prefix N] [--threads T] [--netem] [--json]
The test in the suite runs random:tiny with a 2K-token prefix (checks 1-2); the closing-note
measurement: --model random:qwen3-0.6b --prefix 16384 --netem.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, finish  # noqa: E402

NS = {"redis": "rlx_redis", "a": "rlx_a", "b": "rlx_b"}
LINKS = {"a": ("10.77.1.1", "10.77.1.2"), "b": ("10.77.2.1", "10.77.2.2")}  # (server side, replica side)
PORT = 8000
BS = 16

CLIENT = r"""
import json, sys, time, urllib.request
port, body = sys.argv[1], sys.stdin.read()
t0 = time.time()
req = urllib.request.Request("http://127.0.0.1:%s%s" % (port, sys.argv[2]), data=body.encode() if body else None,
                             headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=3600) as r:
    out = r.read().decode()
print(json.dumps({"seconds": time.time() - t0, "body": out}))
"""


def sh(*args, check_rc=True):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check_rc and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(args), r.stderr.strip()))
    return r


def make_hosts():
    for ns in NS.values():
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    for side, (srv, rep) in LINKS.items():
        ve_s, ve_r = "rlx_s%s" % side, "rlx_r%s" % side
        sh("ip", "link", "add", ve_s, "type", "veth", "peer", "name", ve_r)
        sh("ip", "link", "set", ve_s, "netns", NS["redis"])
        sh("ip", "link", "set", ve_r, "netns", NS[side])
        sh("ip", "-n", NS["redis"], "addr", "add", srv + "/24", "dev", ve_s)
        sh("ip", "-n", NS[side], "addr", "add", rep + "/24", "dev", ve_r)
        sh("ip", "-n", NS["redis"], "link", "set", ve_s, "up")
        sh("ip", "-n", NS[side], "link", "set", ve_r, "up")


def remove_hosts():
    for ns in NS.values():
        sh("ip", "netns", "del", ns, check_rc=False)


def in_ns(ns, *args, **kw):
    return subprocess.Popen(["ip", "netns", "exec", ns] + list(args), **kw)


def request(ns, path, body=None):
    r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", CLIENT, str(PORT), path],
                       input=json.dumps(body) if body is not None else "", capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip()[-500:])
    out = json.loads(r.stdout)
    return out["seconds"], out["body"]


def wait_health(ns, proc):
    for _ in range(600):
        if proc.poll() is not None:
            raise RuntimeError("radixlm serve in %s exited" % ns)
        try:
            request(ns, "/health")
            return
        except RuntimeError:
            time.sleep(0.2)
    raise RuntimeError("radixlm serve in %s did not come up" % ns)


def complete(ns, prompt):
    seconds, body = request(ns, "/v1/completions", {"prompt": prompt, "max_tokens": 4, "temperature": 0,
                                                     "return_token_ids": True, "logprobs": 2})
    out = json.loads(body)
    c = out["choices"][0]
    return seconds, (c.get("token_ids"), c["logprobs"]["token_logprobs"]), out["usage"]["prompt_tokens_details"]["cached_tokens"]


def remote_metric(ns, name):
    _, text = request(ns, "/metrics")
    for line in text.splitlines():
        if line.startswith(name + '{medium="remote"} '):
            return float(line.split()[1])
    return -1.0


def shape_link():
    """1 ms delay and 1 Gbit/s each way on B's link (netem); where the kernel has no sch_netem,
    the rate alone (tbf), said in the result."""
    for ns, dev in ((NS["b"], "rlx_rb"), (NS["redis"], "rlx_sb")):
        r = sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", "1ms", "rate", "1gbit",
               check_rc=False)
        if r.returncode != 0:
            sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", "1gbit", "burst", "256kb",
               "latency", "50ms")
            shaped = "tbf rate 1gbit (this kernel has no sch_netem: no added delay)"
        else:
            shaped = "netem delay 1ms rate 1gbit"
    return shaped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("radixlm")
    ap.add_argument("--model", default="random:tiny")
    ap.add_argument("--prefix", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--netem", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if shutil.which("redis-server") is None:
        print("SKIP: redis-server not installed (scripts/setup.sh installs it)")
        return 77
    remove_hosts()
    try:
        make_hosts()
    except (RuntimeError, FileNotFoundError) as e:
        remove_hosts()
        print("SKIP: network namespaces cannot be made here (%s)" % str(e)[:200])
        return 77
    work = tempfile.mkdtemp(prefix="radixlm_hosts_")
    procs = []
    result = {"model": args.model, "prefix_tokens": args.prefix}
    try:
        redis = in_ns(NS["redis"], "redis-server", "--bind", LINKS["a"][0], LINKS["b"][0], "--port", "6379",
                      "--protected-mode", "no", "--save", "", "--appendonly", "no", "--maxmemory", "8gb",
                      "--maxmemory-policy", "allkeys-lru", "--dir", work,
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(redis)
        time.sleep(0.5)
        kv = str(max(4096, args.prefix + 1024))
        common = ["serve", "-m", args.model, "--kv-tokens", kv, "--block-tokens", str(BS), "--threads", str(args.threads),
                  "--host", "127.0.0.1", "--port", str(PORT), "--max-total-tokens", kv]

        def replica(side):
            p = in_ns(NS[side], args.radixlm, *common, "--cache-remote", "redis://%s:6379/0" % LINKS[side][0],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(p)
            wait_health(NS[side], p)
            return p

        rng = random.Random(51)
        prompt = [rng.randrange(1000, 30000) for _ in range(args.prefix)] + [rng.randrange(1000, 30000) for _ in range(7)]
        full = (len(prompt) - 1) // BS * BS
        replica("a")
        cold, want, _ = complete(NS["a"], prompt)
        result["a_cold_seconds"] = cold
        print("replica A cold: %.2f s for %d tokens" % (cold, len(prompt)), flush=True)
        time.sleep(1.0 + args.prefix / 4000)  # A's writes are behind its request
        b = replica("b")
        warm, got, cached = complete(NS["b"], prompt)
        result.update(b_first_seconds=warm, b_cached_tokens=cached, ratio=warm / cold)
        check(cached == full, "2. replica B's first request, another host: cached_tokens %d of %d from the remote tier" % (cached, full))
        check(got == want, "2. ... the same greedy answer as replica A")
        print("replica B first request: %.3f s = %.3fx A's cold TTFT" % (warm, warm / cold), flush=True)
        read, waited = remote_metric(NS["b"], "radixlm_cache_tier_read_bytes_total"), \
            remote_metric(NS["b"], "radixlm_cache_tier_load_seconds_total")
        result.update(b_read_bytes=read, b_load_seconds=waited)
        if args.netem:
            b.terminate()
            b.wait()
            result["shaping"] = shape_link()
            print("link shaped: %s" % result["shaping"], flush=True)
            replica("b")
            slow, got2, cached2 = complete(NS["b"], prompt)
            read2 = remote_metric(NS["b"], "radixlm_cache_tier_read_bytes_total")
            waited2 = remote_metric(NS["b"], "radixlm_cache_tier_load_seconds_total")
            result.update(netem_seconds=slow, netem_ratio=slow / cold, netem_cached_tokens=cached2,
                          netem_read_bytes=read2, netem_load_seconds=waited2,
                          netem_gbit_per_s=read2 * 8 / 1e9 / waited2 if waited2 > 0 else None)
            check(got2 == want and cached2 == full, "3. over the shaped link: the same answer, cached_tokens %d" % cached2)
            print("shaped link: %.3f s = %.3fx A's cold TTFT; %.0f MB read in %.3f s of load = %.2f Gbit/s"
                  % (slow, slow / cold, read2 / 1e6, waited2, result["netem_gbit_per_s"] or 0), flush=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        remove_hosts()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
    finish()


if __name__ == "__main__":
    sys.exit(main())
