"""Load under attack: real clients against `radixlm serve` with slowloris and idle keep-alive
connections alongside, against the same load without them (issue 19's acceptance run).

Usage: hostile_load.py RADIXLM [--model random:tiny] [--clients 64] [--seconds 300]
                       [--slowloris 100] [--idle 100] [--rounds 1] [--json]
Each round runs the load twice on a fresh server, without attackers then with them (the order
alternates between rounds), and reports per run: requests, errors, latency p50 / p99 (s),
throughput, and the server's RSS (MiB) at start, end and peak. Bounded: loopback only, every
socket has a timeout, every loop ends with its run. Not a test: run it by hand.
Latency is one non-streaming completion of max_tokens 16 (temperature 0) from request to body.
"""
import argparse
import json
import multiprocessing
import random
import socket
import statistics
import subprocess
import threading
import time
import urllib.error
import urllib.request

HOST = "127.0.0.1"


def free_port():
    s = socket.socket()
    s.bind((HOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def client(base, stop, latencies, errors, seed):
    rng = random.Random(seed)
    words = ["the", "lord", "said", "unto", "moses", "and", "israel", "went", "forth", "into", "land"]
    while not stop.is_set():
        prompt = " ".join(rng.choice(words) for _ in range(rng.randint(8, 40)))
        body = json.dumps({"prompt": prompt, "max_tokens": 16, "temperature": 0}).encode()
        req = urllib.request.Request(base + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                r.read()
                ok = r.status == 200
        except (urllib.error.URLError, OSError):
            ok = False
        if ok:
            latencies.append(time.monotonic() - t0)
        else:
            errors.append(time.monotonic())


def slowloris(port, stop):
    """One connection that trickles a header byte a second; reopens when the server closes it."""
    while not stop.is_set():
        try:
            s = socket.create_connection((HOST, port), timeout=5)
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
            while not stop.is_set():
                s.sendall(b"X")
                stop.wait(1.0)
        except OSError:
            stop.wait(0.2)


def idle_keepalive(port, stop):
    """One keep-alive connection that asks once and then idles; reopens when closed."""
    while not stop.is_set():
        try:
            s = socket.create_connection((HOST, port), timeout=5)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            s.recv(4096)
            s.settimeout(1.0)
            while not stop.is_set():
                try:
                    if s.recv(1) == b"":
                        break  # closed by the server: open another
                except socket.timeout:
                    continue
        except OSError:
            stop.wait(0.2)


def attack(port, n_slow, n_idle, stop):
    """The attackers, in a process of their own so that they do not slow the clients' threads."""
    threads = [threading.Thread(target=slowloris, args=(port, stop), daemon=True) for _ in range(n_slow)]
    threads += [threading.Thread(target=idle_keepalive, args=(port, stop), daemon=True) for _ in range(n_idle)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)


def run(binary, model, clients, seconds, attackers, n_slow, n_idle):
    port = free_port()
    server = subprocess.Popen([binary, "serve", "--model", model, "--port", str(port), "--threads", "2"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = "http://%s:%d" % (HOST, port)
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        stop = threading.Event()
        threads = []
        attack_stop = multiprocessing.Event()
        attacker = multiprocessing.Process(target=attack, args=(port, n_slow, n_idle, attack_stop)) if attackers else None
        if attacker:
            attacker.start()
            time.sleep(3)  # every attacking connection open before the clients start
        latencies, errors = [], []
        threads += [threading.Thread(target=client, args=(base, stop, latencies, errors, i)) for i in range(clients)]
        rss = [rss_mib(server.pid)]
        t0 = time.monotonic()
        for t in threads:
            t.daemon = True
            t.start()
        while time.monotonic() - t0 < seconds:
            time.sleep(5)
            rss.append(rss_mib(server.pid))
        stop.set()
        attack_stop.set()
        for t in threads:
            t.join(timeout=70)
        if attacker:
            attacker.join(timeout=30)
            if attacker.is_alive():
                attacker.kill()
        elapsed = time.monotonic() - t0
        lat = sorted(latencies)
        p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")
        return {"attackers": attackers, "requests": len(lat), "errors": len(errors), "p50_s": p(0.50), "p99_s": p(0.99),
                "mean_s": statistics.mean(lat) if lat else float("nan"), "requests_per_s": len(lat) / elapsed,
                "rss_start_mib": rss[0], "rss_end_mib": rss[-1], "rss_peak_mib": max(rss),
                "rss_after_warmup_mib": rss[min(2, len(rss) - 1)]}
    finally:
        server.terminate()
        try:
            server.wait(timeout=40)
        except subprocess.TimeoutExpired:
            server.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("radixlm")
    ap.add_argument("--model", default="random:tiny")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--slowloris", type=int, default=100)
    ap.add_argument("--idle", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    results = []
    for r in range(a.rounds):
        order = [False, True] if r % 2 == 0 else [True, False]
        for attackers in order:
            res = run(a.radixlm, a.model, a.clients, a.seconds, attackers, a.slowloris, a.idle)
            res["round"] = r
            results.append(res)
            if not a.json:
                print("round %d %-16s requests %6d errors %d p50 %.3f s p99 %.3f s %.1f req/s RSS %.0f -> %.0f MiB (peak %.0f)" % (
                    r, "with attackers" if attackers else "no attackers", res["requests"], res["errors"], res["p50_s"],
                    res["p99_s"], res["requests_per_s"], res["rss_start_mib"], res["rss_end_mib"], res["rss_peak_mib"]), flush=True)
    if a.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
