#!/usr/bin/env python3
"""Restart TTFT with the disk tier (issue 29): a long shared prefix served, the server stopped
(SIGTERM; separately kill -9 while its blocks are being written), started again; the first
request on that prefix after the restart against a warm in-RAM hit and a cold start. Also the
tier's read bandwidth against dd's on the same files.

  bench/tier_restart.py BINARY [--model random:qwen3-0.6b] [--prefix 16000] [--suffix 64]
                        [--dir /tmp/radixlm_tier_bench] [--drop-caches]

TTFT here is the wall time of a max_tokens=1 completion (prefill + one sampled token), median of
--repeat runs where a run can be repeated. --drop-caches (root) also measures a restart with the
page cache emptied (the blocks come from the device, as after a reboot).
"""
import argparse
import glob
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from harness import free_port, metric, serve, stop  # noqa: E402


def ask(base, prompt):
    body = {"prompt": prompt, "max_tokens": 1, "temperature": 0}
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.time()
    with urllib.request.urlopen(req, timeout=3600) as r:
        out = json.loads(r.read())
    return time.time() - t0, out["usage"]["prompt_tokens_details"]["cached_tokens"], out["choices"][0]["text"]


def wait_up(base, proc):
    for _ in range(600):
        try:
            urllib.request.urlopen(base + "/health", timeout=1)
            return
        except Exception:
            if proc.poll() is not None:
                raise SystemExit("the server exited")
            time.sleep(0.2)


def start(binary, args):
    port = free_port()
    proc, base = serve(binary, args, port)
    wait_up(base, proc)
    return proc, base


def drop_caches():
    subprocess.run(["sync"])
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def read_bandwidth(paths):
    """GB/s of reading these files in full, one process (cat), one after the other; and of dd
    (bs=4M) reading one file of the same total size on the same file system (written first)."""
    total = sum(os.path.getsize(p) for p in paths)
    t0 = time.time()
    for i in range(0, len(paths), 200):
        subprocess.run(["cat"] + paths[i:i + 200], stdout=subprocess.DEVNULL, check=True)
    return total / (time.time() - t0) / 1e9, total


def dd_bandwidth(folder, size, drop):
    big = os.path.join(folder, "dd.bin")
    subprocess.run(["dd", "if=/dev/zero", "of=" + big, "bs=4M", "count=%d" % (size // (4 << 20) + 1), "status=none"], check=True)
    if drop:
        drop_caches()
    t0 = time.time()
    subprocess.run(["dd", "if=" + big, "of=/dev/null", "bs=4M", "status=none"], check=True)
    gbps = os.path.getsize(big) / (time.time() - t0) / 1e9
    os.unlink(big)
    return gbps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--model", default="random:qwen3-0.6b")
    ap.add_argument("--prefix", type=int, default=16000)
    ap.add_argument("--suffix", type=int, default=64)
    ap.add_argument("--dir", default="/tmp/radixlm_tier_bench")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--drop-caches", action="store_true")
    a = ap.parse_args()
    rng = random.Random(7)
    prefix = [rng.randrange(1000, 150000) for _ in range(a.prefix)]
    suffix = lambda: [rng.randrange(1000, 150000) for _ in range(a.suffix)]  # noqa: E731
    shutil.rmtree(a.dir, ignore_errors=True)
    kv = str(a.prefix + 4 * a.suffix + 1024)
    args = ["-m", a.model, "--kv-tokens", kv, "--cache-dir", a.dir, "--cache-disk-gb", "20"]
    res = {}

    proc, base = start(a.binary, args)
    res["cold"], _, _ = ask(base, prefix + suffix())
    warm = [ask(base, prefix + suffix()) for _ in range(a.repeat)]
    res["warm"] = statistics.median(t for t, _, _ in warm)
    res["warm_cached"] = warm[0][1]
    t0 = time.time()
    stop(proc)
    res["sigterm_exit_s"] = time.time() - t0
    files = glob.glob(os.path.join(a.dir, "v1", "*", "kv", "*", "*.kv"))
    res["disk_blocks"] = len(files)

    disk = []
    for _ in range(a.repeat):  # each run a fresh process: its pool is empty, the page cache warm
        proc, base = start(a.binary, args)
        t, cached, _ = ask(base, prefix + suffix())
        disk.append((t, cached, metric(base, 'radixlm_cache_tier_read_bytes_total{medium="disk"}'),
                     metric(base, 'radixlm_cache_tier_load_seconds_total{medium="disk"}')))
        stop(proc)
    res["disk_after_sigterm"] = statistics.median(t for t, _, _, _ in disk)
    res["tier_gbps_page_cache"] = statistics.median(b / s / 1e9 for _, _, b, s in disk)
    res["disk_cached"] = disk[0][1]
    res["disk_read_gb"] = disk[0][2] / 1e9
    if a.drop_caches:
        drop_caches()
        proc, base = start(a.binary, args)
        t, cached, _ = ask(base, prefix + suffix())
        read = metric(base, 'radixlm_cache_tier_read_bytes_total{medium="disk"}')
        seconds = metric(base, 'radixlm_cache_tier_load_seconds_total{medium="disk"}')
        stop(proc)
        res["disk_cold_page_cache"] = t
        res["disk_cold_cached"] = cached
        res["tier_gbps_cold"] = read / seconds / 1e9
        drop_caches()
        res["cat_block_files_gbps_cold"], _ = read_bandwidth(files)
        res["dd_one_file_gbps_cold"] = dd_bandwidth(a.dir, sum(os.path.getsize(f) for f in files), True)
    res["cat_block_files_gbps_page_cache"], total = read_bandwidth(files)
    res["dd_one_file_gbps_page_cache"] = dd_bandwidth(a.dir, total, False)
    res["bytes_on_disk_gb"] = total / 1e9

    # kill -9 while the blocks are being written: a new folder, the server killed right after the
    # prefill's answer (the writer is still behind), then started again.
    shutil.rmtree(a.dir, ignore_errors=True)
    proc, base = start(a.binary, args)
    ask(base, prefix + suffix())  # killed the moment its answer arrives: later blocks are still queued
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    res["after_kill9_files"] = len(glob.glob(os.path.join(a.dir, "v1", "*", "kv", "*", "*.kv")))
    res["after_kill9_tmp_files"] = len(glob.glob(os.path.join(a.dir, "v1", "*", "tmp", "*")))
    proc, base = start(a.binary, args)
    res["after_kill9_tmp_files_at_start"] = len(glob.glob(os.path.join(a.dir, "v1", "*", "tmp", "*")))
    res["disk_after_kill9"], res["disk_after_kill9_cached"], _ = ask(base, prefix + suffix())
    stop(proc)
    shutil.rmtree(a.dir, ignore_errors=True)
    res["ratio_disk_to_warm"] = res["disk_after_sigterm"] / res["warm"]
    res["ratio_cold_to_warm"] = res["cold"] / res["warm"]
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
