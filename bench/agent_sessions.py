#!/usr/bin/env python3
"""Agent sessions, radixlm vs llama-server (issue 46; a benchmark, not a test): Claude Code and
Codex CLI each drive an N-turn session (`claude -p` then `claude -p --continue`; `codex exec` then
`codex exec resume --last`) against `radixlm serve` and `llama-server` on the same GGUF, 2 threads,
alternating which engine goes first. Between each client and its server sits a recording proxy:
per request, time to first token (request forwarded to the first streamed delta of generated
text, thinking or call arguments), the prompt's size (the usage the server streams), and the
prompt tokens the server computed (radixlm: Δ radixlm_prompt_tokens_total - Δ
radixlm_cache_hit_tokens_total; llama-server: Δ llamacpp:prompt_tokens_total, its evaluated
tokens; both from /metrics around the request). Per turn the first request's figures are
reported (a turn is one request unless the model calls a tool).

A random-weight model rarely ends a turn, and both agents treat a cut reply as an error, so both
servers get the same bias on <|im_end|> (`--logit-bias ID+10`, llama.cpp's option, which radixlm
also has) and the same reply cap (llama-server -n 256, radixlm --max-output-tokens 256).

  bench/vs_llamacpp.sh --build-only          # llama-server, from node-llama-cpp's bundle
  radixlm export random:qwen35-0.8b --out q35.gguf
  bench/agent_sessions.py --model q35.gguf [--clients claude,codex] [--turns 6] [--out r.jsonl]

Clients: scripts/setup_agent_clients.sh, or --clients-bin DIR. Each session runs in a throwaway
HOME and folder (Claude Code in dontAsk mode, Codex read-only with approval never)."""
import argparse
import http.client
import http.server
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
import agent_clients_test as clients  # noqa: E402  (the clients' hardened settings)
from server_test import free_port  # noqa: E402

DELTA_EVENTS = {"content_block_delta", "response.output_text.delta", "response.reasoning_text.delta",
                "response.reasoning_summary_text.delta", "response.function_call_arguments.delta"}


def metrics(port):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


class Recorder:
    """A proxy in front of a server: forwards every request, records model requests."""

    def __init__(self, upstream, engine):
        self.upstream, self.engine, self.records, self.lock = upstream, engine, [], threading.Lock()
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_HEAD(self):
                self.forward()

            def do_GET(self):
                self.forward()

            def do_POST(self):
                self.forward()

            def forward(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                if body and os.environ.get("AGENT_BENCH_CAPTURE"):  # the request bodies, for a look
                    with open(os.environ["AGENT_BENCH_CAPTURE"], "ab") as f:
                        f.write(body + b"\n")
                model = self.command == "POST" and any(p in self.path for p in ("/messages", "/responses", "/chat/completions"))
                model = model and "count_tokens" not in self.path
                before = rec.computed() if model else None
                conn = http.client.HTTPConnection("127.0.0.1", rec.upstream, timeout=3600)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "accept-encoding", "connection")}
                t0 = time.time()
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                first, usage, buf = None, {}, b""
                while True:
                    chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
                    if not chunk:
                        break
                    if model:
                        buf += chunk
                        *lines, buf = buf.split(b"\n")
                        for line in lines:
                            first, usage = rec.scan(line, first, usage)
                    if self.command != "HEAD":
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                if self.command != "HEAD":
                    self.wfile.write(b"0\r\n\r\n")
                if model:
                    if buf:
                        first, usage = rec.scan(buf, first, usage)
                    after = rec.computed()
                    with rec.lock:
                        rec.records.append({"engine": rec.engine, "path": self.path.split("?")[0], "status": resp.status,
                                            "ttft": (first - t0) if first else None, "seconds": time.time() - t0,
                                            "computed": after - before, **usage})

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def computed(self):
        m = metrics(self.upstream)
        if self.engine == "radixlm":
            return m.get("radixlm_prompt_tokens_total", 0) - m.get("radixlm_cache_hit_tokens_total", 0)
        return m.get("llamacpp:prompt_tokens_total", 0)

    @staticmethod
    def scan(line, first, usage):
        line = line.strip()
        if not line.startswith(b"data:"):
            return first, usage
        try:
            ev = json.loads(line[5:])
        except ValueError:
            return first, usage
        t = ev.get("type", "")
        if first is None and (t in DELTA_EVENTS or (ev.get("choices") and ev["choices"][0].get("delta", {}).get("content"))):
            first = time.time()
        # A reply whose first token ends it streams no delta: its end is its first token.
        if first is None and t in ("message_delta", "response.completed", "response.incomplete"):
            first = time.time()
        u = None
        if t == "message_start":
            u = ev.get("message", {}).get("usage")
        elif t in ("response.completed", "response.incomplete"):
            u = ev.get("response", {}).get("usage")
        if u:
            prompt = u.get("input_tokens", 0) + u.get("cache_read_input_tokens", 0) + u.get("cache_creation_input_tokens", 0) \
                if t == "message_start" else u.get("input_tokens", 0)
            usage = {"prompt": prompt}
        return first, usage

    def close(self):
        self.server.shutdown()


def start_server(engine, args, port, end_id):
    if engine == "radixlm":
        argv = [args.radixlm, "serve", "-m", args.model, "--port", str(port), "--threads", str(args.threads),
                "--logit-bias", "%d+10" % end_id, "--max-output-tokens", "256", "--kv-tokens", str(args.ctx)]
    else:
        argv = [args.llama_server, "-m", args.model, "--port", str(port), "-t", str(args.threads), "-c", str(args.ctx),
                "--metrics", "--jinja", "-n", "256", "--logit-bias", "%d+10" % end_id, "-np", "1"]
    log = open(os.path.join(args.work, engine + ".log"), "a")
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        try:
            if urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2).status == 200:
                return p
        except OSError:
            pass
        if p.poll() is not None:
            raise RuntimeError("%s exited (%s.log)" % (engine, engine))
        time.sleep(0.5)
    raise RuntimeError(engine + " did not start")


def session(client, engine, args, end_id, rnd):
    port = free_port()
    server = start_server(engine, args, port, end_id)
    rec = Recorder(port, engine)
    home = tempfile.mkdtemp(prefix="agent-bench-")
    out = []
    try:
        h, w = os.path.join(home, "home"), os.path.join(home, "work")
        os.makedirs(h)
        os.makedirs(w)
        clients.MODEL_NAME = json.loads(urllib.request.urlopen("http://127.0.0.1:%d/v1/models" % port).read())["data"][0]["id"]
        for turn in range(1, args.turns + 1):
            n = len(rec.records)
            t0 = time.time()
            ok, what = turn_of(client, rec.port, h, w, turn)
            reqs = rec.records[n:]
            first = reqs[0] if reqs else {}
            row = {"client": client, "engine": engine, "round": rnd, "turn": turn, "ok": ok, "requests": len(reqs),
                   "prompt": first.get("prompt"), "computed": first.get("computed"), "ttft": first.get("ttft"),
                   "turn_seconds": time.time() - t0, "errors": sum(r["status"] >= 400 for r in reqs)}
            out.append(row)
            print(json.dumps(row), flush=True)
            if not ok:
                print("   " + what[-400:], flush=True)
    finally:
        rec.close()
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(home, ignore_errors=True)
    return out


# The clients' hardened settings are the test's (tests/agent_clients_test.py); a turn may take
# long here (a llama-server prefill of 19K tokens), and a failed one is not retried.
LONG = {"claude": {"CLAUDE_CODE_MAX_RETRIES": "0", "API_TIMEOUT_MS": "3600000"}, "codex": {}}


def turn_of(client, port, home, work, turn):
    prompt = "Step %d: look at the project and say what to do next." % turn
    return clients.TURNS[client]("http://127.0.0.1:%d" % port, home, work, turn == 1, prompt, env=LONG[client], timeout=7200)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--radixlm", default=os.path.join(ROOT, "build/src/cli/radixlm"))
    ap.add_argument("--llama-server", default=os.path.join(ROOT, "build/vs_llamacpp/llama.cpp/build/bin/llama-server"))
    ap.add_argument("--clients", default="claude,codex")
    ap.add_argument("--clients-bin", default=None)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=40960)
    ap.add_argument("--engines", default="radixlm,llama")
    ap.add_argument("--out", default=None)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    if args.clients_bin:
        clients.BIN = args.clients_bin
    args.work = args.work or tempfile.mkdtemp(prefix="agent-sessions-")
    os.makedirs(args.work, exist_ok=True)
    ids = subprocess.run([args.radixlm, "tokenize", "-m", args.model, "--text", "<|im_end|>", "--add-special"],
                         capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1].split(",")
    end_id = int(ids[-1])
    rows = []
    engines = args.engines.split(",")
    for rnd in range(args.rounds):
        for client in args.clients.split(","):
            order = engines if rnd % 2 == 0 else engines[::-1]
            for engine in order:
                rows += session(client, engine, args, end_id, rnd)
    if args.out:
        with open(args.out, "a") as f:
            for r in rows:
                f.write(json.dumps(dict(r, model=os.path.basename(args.model))) + "\n")
    print("\n%-7s %4s | %-28s | %-28s | %s" % ("client", "turn", "radixlm prompt/computed/ttft", "llama-server prompt/computed/ttft",
                                              "ttft ratio"))
    for client in args.clients.split(","):
        for turn in range(1, args.turns + 1):
            cell = {}
            for engine in engines:
                rs = [r for r in rows if r["client"] == client and r["turn"] == turn and r["engine"] == engine and r["ttft"]]
                if rs:
                    cell[engine] = (statistics.median(r["prompt"] or 0 for r in rs), statistics.median(r["computed"] for r in rs),
                                    statistics.median(r["ttft"] for r in rs))
            fmt = lambda c: "%6d / %6d / %7.2fs" % c if c else "%28s" % "-"
            ratio = cell["radixlm"][2] / cell["llama"][2] if "radixlm" in cell and "llama" in cell else float("nan")
            print("%-7s %4d | %-28s | %-28s | %.3f" % (client, turn, fmt(cell.get("radixlm")), fmt(cell.get("llama")), ratio))


if __name__ == "__main__":
    main()
