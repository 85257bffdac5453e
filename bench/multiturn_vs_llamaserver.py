#!/usr/bin/env python3
"""Multi-turn chat against `radixlm serve` and `llama-server` on the same GGUF: time to first
token and prompt tokens computed, per turn (a benchmark, not a test; llama.cpp is a reference,
never a dependency: bench/vs_llamacpp.sh --build-only builds llama-server).

  multiturn_vs_llamaserver.py --model FILE.gguf [--clients 8] [--turns 6] [--system-tokens 1024]
      [--user-tokens 64] [--gen-tokens 32] [--rounds 2] [--threads 2] [--work DIR]
      [--engines radixlm,radixlm-swa-full,llama.cpp,llama.cpp-swa-full]

The workload: CLIENTS conversations at once sharing one system prompt of about SYSTEM_TOKENS
tokens; each turn adds a user message of about USER_TOKENS tokens (seeded random English words)
and asks for GEN_TOKENS tokens, greedy, ignoring end-of-sequence so that every reply has the same
length; the reply goes back into the conversation as the assistant's message. Both servers use
the chatml template, THREADS threads and room for every conversation (llama-server: one slot per
client, its defaults otherwise: context checkpoints and the RAM prompt cache on). Each round runs
every engine, alternating the order (radixlm-swa-full is `radixlm serve --swa-cache full`,
llama.cpp-swa-full is `llama-server --swa-full`). Per request: TTFT (request sent to the first streamed
token), prompt tokens, and prompt tokens computed (radixlm: prompt - usage's cached_tokens;
llama-server: timings.prompt_n, the tokens it evaluated). The table: per turn, the medians over
clients and rounds, and radixlm / llama.cpp TTFT; then each server's peak resident memory."""
import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = ("time person year way day thing man world life hand part child eye woman place work week case point "
         "government company number group problem fact be have do say get make go know take see come think look "
         "want give use find tell ask seem feel try leave call good new first last long great little own other old "
         "right big high different small large next early young important few public bad same able river stone "
         "garden window letter market music history summer winter morning evening question answer reason story "
         "mountain forest ocean island bridge village kitchen table chair paper pencil engine signal network "
         "memory cache prefix model token server client request reply system message turn history model").split()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def token_counts(radixlm, model, texts):
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.jsonl"), os.path.join(d, "out.jsonl")
        with open(src, "w") as f:
            for t in texts:
                f.write(json.dumps({"text": t}) + "\n")
        subprocess.run([radixlm, "tokenize", "--model", model, "--input", src, "--output", dst], check=True)
        return [len(json.loads(l)["ids"]) for l in open(dst)]


def text_of(radixlm, model, rng, target, n):
    """n texts of random words, each cut to about `target` tokens."""
    texts = [" ".join(rng.choice(WORDS) for _ in range(int(target * 1.2))) for _ in range(n)]
    counts = token_counts(radixlm, model, texts)
    out = []
    for t, c in zip(texts, counts):
        words = t.split()
        keep = max(1, int(len(words) * target / c))
        out.append(" ".join(words[:keep]))
    return out, token_counts(radixlm, model, out)


def wait_ready(port, proc, seconds=300):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited with %d" % proc.returncode)
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("server not ready")


def start(engine, args, port):
    if engine.startswith("radixlm"):
        cmd = [args.radixlm, "serve", "--model", args.model, "--port", str(port), "--threads", str(args.threads),
               "--chat-template", "chatml", "--model-name", "m", "--max-running", str(args.clients),
               "--kv-tokens", str(args.clients * args.ctx_per_client)]
        if engine == "radixlm-swa-full":
            cmd += ["--swa-cache", "full"]
        else:
            cmd += args.radixlm_args.split()
    else:
        cmd = [args.llama_server, "-m", args.model, "--port", str(port), "-t", str(args.threads), "-tb",
               str(args.threads), "-np", str(args.clients), "-c", str(args.clients * args.ctx_per_client),
               "--chat-template", "chatml", "--no-webui"]
        if engine == "llama.cpp-swa-full":
            cmd += ["--swa-full"]
    log = open(os.path.join(args.work, engine + ".log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    wait_ready(port, proc)
    return proc


def chat(port, messages, args):
    """One streamed request: (ttft seconds, prompt tokens, computed prompt tokens, reply text)."""
    body = {"model": "m", "messages": messages, "max_tokens": args.gen_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True, "stream_options": {"include_usage": True}}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("HTTP %d: %s" % (r.status, r.read()[:300]))
    ttft, reply, usage, timings = None, [], None, None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        ev = json.loads(data)
        for ch in ev.get("choices", []):
            piece = (ch.get("delta") or {}).get("content")
            if piece:
                if ttft is None:
                    ttft = time.perf_counter() - t0
                reply.append(piece)
        usage = ev.get("usage") or usage
        timings = ev.get("timings") or timings
    prompt = usage["prompt_tokens"] if usage else None
    if timings is not None:  # llama-server: the tokens it evaluated
        computed = timings.get("prompt_n")
    else:
        cached = ((usage or {}).get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        computed = prompt - cached if prompt is not None else None
    return ttft, prompt, computed, "".join(reply)


peak = {}  # engine -> the server's peak resident MiB over the rounds


def peak_rss_mib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def run_engine(engine, args, system, users, rnd):
    port = free_port()
    proc = start(engine, args, port)
    rows = []
    try:
        chat(port, [{"role": "user", "content": "warm up"}], args)  # weights paged in, threads up
        lock = threading.Lock()

        def client(i):
            messages = [{"role": "system", "content": system}]
            for turn in range(args.turns):
                messages.append({"role": "user", "content": users[i][turn]})
                ttft, prompt, computed, reply = chat(port, messages, args)
                messages.append({"role": "assistant", "content": reply})
                with lock:
                    rows.append({"engine": engine, "round": rnd, "client": i, "turn": turn + 1, "ttft": ttft,
                                 "prompt_tokens": prompt, "computed_tokens": computed})
        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        peak[engine] = max(peak.get(engine, 0), peak_rss_mib(proc.pid))
        if engine.startswith("radixlm"):  # the engine's counters, for a closer look
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("GET", "/metrics")
            with open(os.path.join(args.work, engine + ".metrics"), "w") as f:
                f.write(c.getresponse().read().decode())
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return rows


def table(rows, args, engines):
    """Per turn: prompt tokens, then each engine's computed tokens and TTFT, then each radixlm
    variant's TTFT over the first llama.cpp engine's."""
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    ref = next((e for e in engines if e.startswith("llama.cpp")), None)
    ours = [e for e in engines if e.startswith("radixlm")]
    head = ["turn", "prompt tokens"] + ["%s computed" % e for e in engines] + ["%s TTFT s" % e for e in engines]
    head += ["%s / %s" % (e, ref) for e in ours] if ref else []
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for turn in range(1, args.turns + 1):
        get = lambda e, k: [r[k] for r in rows if r["engine"] == e and r["turn"] == turn and r[k] is not None]
        cells = ["%d" % turn, "%.0f" % med(get(engines[0], "prompt_tokens"))]
        cells += ["%.0f" % med(get(e, "computed_tokens")) for e in engines]
        cells += ["%.2f" % med(get(e, "ttft")) for e in engines]
        if ref:
            cells += ["%.2fx" % (med(get(e, "ttft")) / med(get(ref, "ttft"))) for e in ours]
        print("| " + " | ".join(cells) + " |")
    print("\npeak resident MiB: " + ", ".join("%s %.0f" % (e, peak.get(e, 0)) for e in engines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--radixlm", default=os.path.join(ROOT, "build", "src", "cli", "radixlm"))
    ap.add_argument("--llama-server", default=os.path.join(ROOT, "build", "vs_llamacpp", "llama.cpp", "build", "bin",
                                                           "llama-server"))
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--system-tokens", type=int, default=1024)
    ap.add_argument("--user-tokens", type=int, default=64)
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx-per-client", type=int, default=2048)
    # radixlm | radixlm-swa-full (--swa-cache full) | llama.cpp | llama.cpp-swa-full (--swa-full)
    ap.add_argument("--engines", default="radixlm,llama.cpp")
    ap.add_argument("--radixlm-args", default="", help="more options for the radixlm engine (not radixlm-swa-full)")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "multiturn"))
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rng = random.Random(7)
    system_texts, system_counts = text_of(args.radixlm, args.model, rng, args.system_tokens, 1)
    flat, counts = text_of(args.radixlm, args.model, rng, args.user_tokens, args.clients * args.turns)
    users = [flat[i * args.turns:(i + 1) * args.turns] for i in range(args.clients)]
    print("system prompt %d tokens; user messages %.1f tokens on average" % (system_counts[0], statistics.mean(counts)),
          file=sys.stderr)
    engines = args.engines.split(",")
    rows = []
    out = open(os.path.join(args.work, "results.jsonl"), "w")
    for rnd in range(1, args.rounds + 1):
        order = engines if rnd % 2 else engines[::-1]
        for e in order:
            t0 = time.time()
            got = run_engine(e, args, system_texts[0], users, rnd)
            for r in got:
                out.write(json.dumps(r) + "\n")
            out.flush()
            rows += got
            print("round %d %s: %.0f s" % (rnd, e, time.time() - t0), file=sys.stderr)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print("CPU: %s; %s; %d clients x %d turns, system prompt %d tokens, +%d user tokens and %d generated per turn; "
          "%d threads; medians over clients and %d rounds, engines alternated\n" % (
              cpu, os.path.basename(args.model), args.clients, args.turns, system_counts[0], args.user_tokens,
              args.gen_tokens, args.threads, args.rounds))
    table(rows, args, engines)


if __name__ == "__main__":
    main()
