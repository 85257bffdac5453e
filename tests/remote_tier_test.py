#!/usr/bin/env python3
"""The remote tier (Redis) under the KV pool, end to end, with two `radixlm serve` replicas of
random:tiny and one redis-server of the test's own (a unix socket in a scratch folder); answers
(greedy: tokens and log-probabilities) compared bitwise with a server that caches nothing:

  1. replica A serves prompts through the remote tier; replica B's first request on one of A's
     prompts is a remote hit (cached_tokens = its full blocks), the same answer, computing only
     the tail; /server_info and /metrics name the "remote" medium;
  2. faults under a flood of requests on B: redis-server killed mid-flood and restarted (empty),
     every value corrupted (a flipped bit, truncated), the server full (maxmemory, noeviction):
     every answer equals the plain server's, no request fails, the failures are counted;
  3. the tiers stack: replica C with --cache-dir and --cache-remote reports cpu, disk and remote,
     and its first request on A's prompt (an empty folder) is served from the remote tier;
  4. attach across replicas (random:qwen3-0.6b, slow enough to catch a prefill midway): B's
     request on a prompt A is still prefilling waits for A's blocks (B computes only the tail,
     cached_tokens = the prompt's full blocks, A's answer), and a request on a prompt whose
     marker was killed midway waits no longer than computing it would take, then computes it.

SKIPPED (77) where redis-server is not installed (scripts/setup.sh installs it).
Usage: remote_tier_test.py RADIXLM_BINARY
"""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, finish, free_port, metric, serve, stop  # noqa: E402
from tier_test import BS, complete, tier_metric  # noqa: E402


class Redis:
    def __init__(self, folder):
        self.sock = os.path.join(folder, "redis.sock")
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", self.sock, "--save", "",
                                      "--appendonly", "no", "--maxmemory", "256mb", "--maxmemory-policy", "allkeys-lru"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.exists(self.sock) and self.cli("PING") == "PONG":
                return
            time.sleep(0.02)

    def kill(self):
        self.proc.kill()
        self.proc.wait()
        if os.path.exists(self.sock):
            os.remove(self.sock)

    def cli(self, *args):
        out = subprocess.run(["redis-cli", "-s", self.sock] + list(args), capture_output=True, text=True)
        return out.stdout.strip()

    def url(self):
        return "unix://" + self.sock


def flood(base, prompts, errors):
    for p in prompts:
        try:
            yield complete(base, p)[0]
        except Exception as e:  # noqa: BLE001 -- a failed request is what the test counts
            errors.append(repr(e))
            yield None


def corrupt_all(redis, rng):
    """Every block value: a flipped bit, or cut in half (raw bytes through redis-cli's stdin)."""
    keys = [k for k in redis.cli("--scan", "--pattern", "radixlm:v1:*:kv:*").split("\n") if k]
    for i, k in enumerate(keys):
        value = bytearray(subprocess.run(["redis-cli", "-s", redis.sock, "GET", k], capture_output=True).stdout[:-1])
        if not value:
            continue
        if i % 2:
            value = value[:len(value) // 2]
        else:
            at = rng.randrange(len(value))
            value[at] ^= 1 << rng.randrange(8)
        subprocess.run(["redis-cli", "-s", redis.sock, "-x", "SET", k], input=bytes(value), capture_output=True)
    return len(keys)


def attach(binary, redis):
    """4. Replica B waits for the blocks replica A is computing, not longer than computing them."""
    rng = random.Random(51)
    prompt = [rng.randrange(1000, 150000) for _ in range(20 * BS + 5)]
    other = [rng.randrange(1000, 150000) for _ in range(20 * BS + 5)]
    full = (len(prompt) - 1) // BS * BS
    args = ["-m", "random:qwen3-0.6b", "--kv-tokens", "1024", "--block-tokens", str(BS), "--threads", "1",
            "--step-tokens", "32", "--cache-remote", redis.url()]
    # A 0.6B model's random weights take ~12 s to make alone; two at once, beside other tests, longer.
    a, abase = serve(binary, args, free_port(), wait_seconds=120)
    b, bbase = serve(binary, args, free_port(), wait_seconds=120)
    try:
        got = {}
        runner = threading.Thread(target=lambda: got.update(a=complete(abase, prompt, 2)))
        t0 = time.time()
        runner.start()
        time.sleep(1.5)  # A is prefilling (32 tokens a step)
        check(runner.is_alive(), "4. A is still prefilling after 1.5 s")
        answer, cached = complete(bbase, prompt, 2)
        runner.join()
        a_seconds = time.time() - t0
        check(cached == full, "4. B's request on the prompt A was prefilling waited for A's blocks: cached_tokens %d of %d" % (cached, full))
        check(answer == got["a"][0], "4. ... with A's answer")
        computed = metric(bbase, "radixlm_computed_tokens_total")
        check(computed <= len(prompt) - full + 4, "4. ... B computed %d tokens (the tail)" % computed)
        check(metric(bbase, "radixlm_cache_remote_waits_total") == 1 and metric(bbase, "radixlm_cache_remote_wait_timeouts_total") == 0,
              "4. ... one wait, that did not run out (A took %.1f s)" % a_seconds)
        # A killed midway: its marks outlive it (until their TTL); B's wait is bounded.
        runner = threading.Thread(target=lambda: complete(abase, other, 2), daemon=True)
        runner.start()
        time.sleep(1.5)
        a.kill()
        a.wait()
        t1 = time.time()
        answer, cached = complete(bbase, other, 2)
        waited = time.time() - t1
        check(answer[0] is not None and cached < full, "4. A killed while prefilling: B's request is served (cached_tokens %d)" % cached)
        timeouts = metric(bbase, "radixlm_cache_remote_wait_timeouts_total")
        check(metric(bbase, "radixlm_cache_remote_waits_total") == 2,
              "4. ... after waiting for the dead replica's marks (%d wait(s) ran out), %.1f s in all" % (timeouts, waited))
    finally:
        stop(a)
        stop(b)


def main():
    binary = sys.argv[1]
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        print("SKIP: redis-server not installed (scripts/setup.sh installs it)")
        sys.exit(77)
    rng = random.Random(50)
    tok = lambda n: [rng.randrange(1000, 150000) for _ in range(n)]  # noqa: E731
    system = tok(700)
    prompts = [system + tok(rng.randrange(20, 200)) for _ in range(4)] + [tok(rng.randrange(300, 900)) for _ in range(4)]
    work = tempfile.mkdtemp(prefix="radixlm_remote_")
    redis = Redis(work)
    redis.start()
    common = ["-m", "random:tiny", "--kv-tokens", "2048", "--block-tokens", str(BS), "--threads", "1"]
    remote = common + ["--cache-remote", redis.url()]
    plain, pbase = serve(binary, ["-m", "random:tiny", "--kv-tokens", "4096", "--no-prefix-cache", "--threads", "1"], free_port())
    procs = [plain]
    try:
        want = [complete(pbase, p)[0] for p in prompts]

        # 1. Two replicas share blocks through Redis.
        a, abase = serve(binary, remote, free_port())
        b, bbase = serve(binary, remote, free_port())
        procs += [a, b]
        check([complete(abase, p)[0] for p in prompts] == want, "1. replica A's answers through the remote tier equal the plain server's")
        time.sleep(0.5)  # A's writes are behind its requests
        answer, cached = complete(bbase, prompts[0])
        full = (len(prompts[0]) - 1) // BS * BS
        check(cached == full, "1. replica B's first request on A's prompt is a remote hit: cached_tokens %d of %d" % (cached, full))
        check(answer == want[0], "1. ... with the same answer")
        check(metric(bbase, "radixlm_computed_tokens_total") <= len(prompts[0]) - full + 6, "1. ... computing only the tail")
        info = json.loads(urllib.request.urlopen(bbase + "/server_info").read())
        media = [t["medium"] for t in info["cache_tiers"]]
        check(media == ["cpu", "remote"], "1. /server_info cache_tiers: %s" % media)
        check(tier_metric(bbase, "radixlm_cache_tier_read_bytes_total", "remote") > 0, "1. /metrics: bytes read from the remote tier")

        # 2. Faults under a flood on B: kill + restart (empty), corrupt values, a full server.
        more = [system + tok(rng.randrange(20, 400)) for _ in range(6)] + [tok(rng.randrange(200, 700)) for _ in range(6)]
        more_want = [complete(pbase, p)[0] for p in more]
        errors, got = [], []
        runner = threading.Thread(target=lambda: got.extend(flood(bbase, more + prompts, errors)))
        runner.start()
        time.sleep(0.3)
        redis.kill()
        time.sleep(0.5)
        redis.start()
        runner.join()
        check(got == more_want + want, "2. redis-server killed mid-flood and restarted empty: every answer unchanged")
        check(not errors, "2. ... no request failed (%s)" % errors[:2])
        lost = tier_metric(bbase, "radixlm_cache_tier_load_failures_total", "remote") + \
            tier_metric(bbase, "radixlm_cache_tier_skipped_stores_total", "remote")
        check(lost > 0, "2. ... the loads and stores the outage cost are counted (%d)" % lost)
        for p in more:
            complete(abase, p)  # A writes them again
        time.sleep(0.5)
        n = corrupt_all(redis, rng)
        c, cbase = serve(binary, remote, free_port())  # a fresh replica: its pool holds nothing
        procs.append(c)
        check([complete(cbase, p)[0] for p in more] == more_want, "2. %d corrupt values: every answer unchanged" % n)
        check(tier_metric(cbase, "radixlm_cache_tier_load_failures_total", "remote") > 0, "2. ... the corrupt loads counted")
        redis.cli("FLUSHALL")
        redis.cli("CONFIG", "SET", "maxmemory-policy", "noeviction")
        redis.cli("CONFIG", "SET", "maxmemory", "1mb")
        errors = []
        check(list(flood(cbase, more + prompts, errors)) == more_want + want and not errors,
              "2. a full server (maxmemory 1 MB, noeviction): every answer unchanged, no request failed")
        time.sleep(0.5)
        check(tier_metric(cbase, "radixlm_cache_tier_skipped_stores_total", "remote") > 0, "2. ... the refused writes counted")
        redis.cli("CONFIG", "SET", "maxmemory", "256mb")
        redis.cli("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")

        # 3. Stacked: disk, then remote.
        complete(abase, prompts[1])
        time.sleep(0.3)
        folder = os.path.join(work, "disk")
        d, dbase = serve(binary, remote + ["--cache-dir", folder, "--cache-disk-gb", "1"], free_port())
        procs.append(d)
        info = json.loads(urllib.request.urlopen(dbase + "/server_info").read())
        media = [t["medium"] for t in info["cache_tiers"]]
        check(media == ["cpu", "disk", "remote"], "3. stacked tiers: %s" % media)
        answer, cached = complete(dbase, prompts[1])
        full = (len(prompts[1]) - 1) // BS * BS
        check(answer == want[1] and cached == full,
              "3. an empty disk folder over the remote tier: cached_tokens %d of %d, the same answer" % (cached, full))
        check(tier_metric(dbase, "radixlm_cache_tier_read_bytes_total", "remote") > 0, "3. ... read from the remote medium")
        for p in procs:
            stop(p)
        procs = []
        attach(binary, redis)
    finally:
        for p in procs:
            stop(p)
        if redis.proc and redis.proc.poll() is None:
            redis.kill()
        shutil.rmtree(work, ignore_errors=True)
    finish()


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
