#!/usr/bin/env python3
"""Speculative decoding without a draft model, radixlm against llama.cpp, side by side: decode
tokens/s of `radixlm serve --speculate off|ngram|tree` and of `llama-server` with no speculation
and with its n-gram speculative modes, on the same GGUF, prompts and greedy settings (a
benchmark, not a test; llama.cpp is a reference, never a dependency: bench/vs_llamacpp.sh
--build-only builds llama-server).

  spec_vs_llamacpp.py [--model models/kjv-qwen3.gguf] [--threads 2] [--rounds 3] [--max-tokens 256]
      [--draft-max 8] [--engines llama.cpp,radixlm] [--radixlm-modes off,ngram,tree]
      [--llama-configs LIST] [--context N] [--json]

Prompts (tests/data/kjv-revelation.txt, the King James Revelation, public domain), sent as raw
completions (a prompt string, no chat template; temperature 0, ignore_eos, so every run decodes
exactly max_tokens tokens):
  continue  whole verses from Rev 21:1 on (up to --continue-tokens, 600), ending with a newline;
            the model continues with the next verse;
  repeat    whole verses from Rev 15:3 on (up to --repeat-tokens, 250), then `\\n\\nThe same passage
            again, with "Lord" written as "LORD":\\n\\n` and the passage's first 6 words (Lord ->
            LORD), so that a model that can copy does: the case n-gram drafts are made for. (The
            7-8M-parameter kjv-* models do not copy: they fall into loops of their own, in both kinds,
            which n-gram drafts also predict.)
Prompt and answer must fit the model's context (the GGUF's context_length, or --context): radixlm
refuses a request longer than it. When they do not, max_tokens is cut to half the context and the
prompts to what is left (kjv-qwen3 / kjv-qwen35 have a context of 256: 128 generated tokens after a
prompt of about 124); the output says so.

Runs: for each round, each prompt kind and each configuration (the order of the configurations
reversed every other round), a fresh server (2 threads, one slot), a warm-up request with another
short prompt (8 tokens; a different prompt so that no draft source - radixlm's prefix cache and
suffix index, llama.cpp's ngram-mod hash and ngram-cache - holds the measured answer), then the
measured request, streamed. Decode tokens/s, measured the same way for both engines on the client:
(completion tokens - 1) / (time of the last streamed token - time of the first). llama-server's
own figure (timings.predicted_per_second: tokens / time from the end of the prompt) and its
draft counters (timings.draft_n, draft_n_accepted) are reported too; for radixlm, every /metrics
line starting with radixlm_spec is read before and after the measured request (the JSON has both
and their difference; the table's drafted/accepted are the differences of the counters whose
names say draft(ed)/accepted). Each engine's speculative answers are compared with its own
no-speculation answer (radixlm's three modes must give the same text: a warning if not; a
llama.cpp mode that does not is flagged); "same as llama" compares with llama.cpp's plain answer.

llama.cpp's speculative decoding without a draft model (this build's `llama-server --help`,
"speculative params", and common/speculative.cpp, common/ngram-map.cpp, common/ngram-mod.cpp,
common/ngram-cache.cpp; all read the token history of the one sequence - prompt and output -
except where said; --spec-draft-n-max / -n-min apply to draft models only, the n-gram modes have
their own sizes; the server caps a draft only by the tokens left to generate and the context):
  ngram-simple   the last n tokens (--spec-ngram-simple-size-n, default 12) looked up backwards in
                 the history, latest occurrence first; drafts the m tokens that followed it
                 (--spec-ngram-simple-size-m, default 48), fewer if the history ends first, none
                 if fewer than n would remain. Prompt lookup, with a long key.
  ngram-map-k    the same key (-size-n 12) looked up through a hash map of n-grams of the history
                 (rebuilt per request); drafts the m tokens after the match (-size-m 48), cut to
                 what was accepted of the last draft from that key (adaptive length).
  ngram-map-k4v  ngram-map-k that also keeps statistics of up to 4 different m-grams seen after
                 each key: drafts the most frequent one only if the key was seen --min-hits times
                 (default 1) and that m-gram occurs at least twice as often as the others together.
  ngram-mod      a hash table (4M entries, shared by all slots and requests, reset when a quarter
                 full or after 5 drafts in a row with < 25% accepted) from the hash of n tokens
                 (--spec-ngram-mod-n-match, default 24) to the token that followed; drafts by
                 chaining lookups, up to --spec-ngram-mod-n-max (64) tokens, and drops drafts
                 shorter than --spec-ngram-mod-n-min (48). `--spec-default` is ngram-mod 24/48/64.
  ngram-cache    llama-lookup's n-gram cache: counts of what followed every 1..4-gram of the
                 context (plus optional static/dynamic caches from files, unused here); drafts up
                 to 8 tokens (fixed in the source), token by token, the continuation of the
                 longest n-gram whose count and share pass a threshold. Its context cache is not
                 reset between requests of a slot.
  (none = no speculation; draft-simple, draft-eagle3, draft-mtp, draft-dflash and draft-dspark
  need a draft model or draft heads, which these models do not have.)
Configurations run by default (--llama-configs, comma-separated, each TYPE or TYPE:key=value:...
where key is the part of the flag after --spec-ngram-<mode>-, and a value K = --draft-max): none; each mode with llama.cpp's
defaults; ngram-simple, ngram-map-k and ngram-map-k4v with size-n=3,size-m=K and ngram-mod with
n-min=1,n-max=K (drafts of at most K tokens, as radixlm's --draft-max K). Modes missing from the
llama-server's --help are skipped with a warning.

radixlm: `radixlm serve -m MODEL --threads T --port P --speculate MODE --draft-max K` (the flags
are checked against `radixlm serve --help` first; a radixlm without --speculate can only run
--radixlm-modes off, which then passes no --speculate flag).

Output: per prompt kind, a table with the median decode tok/s per configuration over the rounds,
its ratio to the same engine's no-speculation median and to llama.cpp's plain median, drafted and
accepted tokens (summed over rounds), and output agreement; --json prints one JSON object
instead. Progress and warnings go to stderr. Run it while nothing else uses the CPU: the
decode of these small models takes a fraction of a second per run, and a server whose threads
share the cores with anything else slows down many times over; each run records the cores other
processes used meanwhile (/proc/stat less the server's and this script's own time) and a warning
names the runs where that exceeded --max-other-cpu (0.3).
"""
import argparse
import http.client
import json
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = os.path.join(ROOT, "tests", "data", "kjv-revelation.txt")
CONTINUE_START = "And I saw a new heaven and a new earth"           # Rev 21:1
REPEAT_START = "And they sing the song of Moses"                      # Rev 15:3 (Lord in 15:3, 15:4, 16:5, 16:7)
REPEAT_ASK = '\n\nThe same passage again, with "Lord" written as "LORD":\n\n'
REPEAT_LEAD_WORDS = 6
WARMUP_PROMPT = "In the beginning God created the heaven and the earth."
WARMUP_TOKENS = 8
LLAMA_MODES = ["ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache"]
WARNINGS = []


def warn(msg):
    WARNINGS.append(msg)
    print("warning: " + msg, file=sys.stderr)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# model and prompts

def gguf_context_length(path):
    """The GGUF's <arch>.context_length (None if absent)."""
    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
              12: "<d"}
    with open(path, "rb") as f:
        def read(fmt):
            return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

        def string():
            return f.read(read("<Q")).decode("utf-8", "replace")

        def value(t):
            if t == 8:
                return string()
            if t == 9:
                at, n = read("<I"), read("<Q")
                if at in scalar:
                    f.seek(struct.calcsize(scalar[at]) * n, 1)
                    return None
                for _ in range(n):
                    value(at)
                return None
            return read(scalar[t])

        if f.read(4) != b"GGUF":
            return None
        read("<I")
        read("<Q")
        n_kv = read("<Q")
        meta = {}
        for _ in range(n_kv):
            k = string()
            meta[k] = value(read("<I"))
        arch = meta.get("general.architecture")
        return meta.get("%s.context_length" % arch)


class Tokenizer:
    """Token counts for sizing the prompts: llama-tokenize next to llama-server (same GPT-2 BPE
    as radixlm's), else `radixlm tokenize`, else an estimate from the word count."""

    def __init__(self, args):
        self.model = args.model
        self.llama_tokenize = os.path.join(os.path.dirname(args.llama_server), "llama-tokenize")
        self.radixlm = args.radixlm
        self.cache = {}
        self.how = None
        self.tmp = tempfile.mkdtemp(prefix="spec_vs_llamacpp_tok_")

    def count(self, text):
        if text in self.cache:
            return self.cache[text]
        path = os.path.join(self.tmp, "t.txt")
        with open(path, "w") as f:
            f.write(text)
        n = None
        if self.how in (None, "llama-tokenize") and os.access(self.llama_tokenize, os.X_OK):
            r = subprocess.run([self.llama_tokenize, "-m", self.model, "-f", path, "--ids", "--log-disable"],
                               capture_output=True, text=True)
            lines = [l for l in r.stdout.splitlines() if l.startswith("[")]
            if r.returncode == 0 and lines:
                n, self.how = len(json.loads(lines[-1])), "llama-tokenize"
        if n is None and self.how in (None, "radixlm tokenize") and os.access(self.radixlm, os.X_OK):
            src, dst = os.path.join(self.tmp, "in.jsonl"), os.path.join(self.tmp, "out.jsonl")
            with open(src, "w") as f:
                f.write(json.dumps({"text": text}) + "\n")
            r = subprocess.run([self.radixlm, "tokenize", "--model", self.model, "--input", src, "--output", dst],
                               capture_output=True, text=True)
            if r.returncode == 0:
                n, self.how = len(json.loads(open(dst).readline())["ids"]), "radixlm tokenize"
        if n is None:
            if self.how is None:
                warn("no tokenizer ran (llama-tokenize, radixlm tokenize): prompt sizes are estimates")
            n, self.how = int(len(text.split()) * 1.35 + 0.5), "estimate"
        self.cache[text] = n
        return n


def verses_from(start):
    lines = [l.rstrip("\n") for l in open(TEXT, encoding="utf-8") if l.strip()]
    i = next((k for k, l in enumerate(lines) if l.startswith(start)), None)
    if i is None:
        raise SystemExit("%s: no verse starts with %r" % (TEXT, start))
    return lines[i:] + lines[:i]


def longest_fit(pieces, build, tok, limit):
    """The longest prefix of `pieces` (at least one) whose build(k) is at most `limit` tokens."""
    lo, hi = 1, len(pieces)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tok.count(build(mid)) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def make_prompts(tok, continue_tokens, repeat_tokens, budget):
    """{kind: prompt}, whole verses: continue <= min(continue_tokens, budget) tokens (ending with a
    newline: the model starts the next verse); repeat's passage <= repeat_tokens tokens and its
    whole prompt <= budget."""
    verses = verses_from(CONTINUE_START)
    k = longest_fit(verses, lambda k: "\n".join(verses[:k]) + "\n", tok, min(continue_tokens, budget))
    cont = "\n".join(verses[:k]) + "\n"

    rverses = verses_from(REPEAT_START)

    def repeat(k):
        passage = "\n".join(rverses[:k])
        lead = " ".join(passage.split(" ")[:REPEAT_LEAD_WORDS]).replace("Lord", "LORD")
        return passage + REPEAT_ASK + lead

    k1 = longest_fit(rverses, lambda k: "\n".join(rverses[:k]), tok, repeat_tokens)
    k2 = longest_fit(rverses, repeat, tok, budget)
    return {"continue": cont, "repeat": repeat(min(k1, k2))}


# ---------------------------------------------------------------------------------------------
# servers

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path, n=15):
    try:
        return "".join(open(path, errors="replace").readlines()[-n:])
    except OSError:
        return ""


def wait_ready(port, proc, logpath, seconds=300):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited with %d before it was ready:\n%s" % (proc.returncode, tail(logpath)))
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            r = c.getresponse()
            r.read()
            if r.status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("server not ready after %d s" % seconds)


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stream(port, path, body):
    """One streamed request: dict with text, first/last token times, the final usage/timings."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    t0 = time.perf_counter()
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("HTTP %d from %s: %s" % (r.status, path, r.read()[:300].decode(errors="replace")))
    pieces, t_first, t_last, n_chunks, usage, timings, final = [], None, None, 0, None, None, None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        ev = json.loads(data)
        now = time.perf_counter()
        piece = ev.get("content")  # llama-server /completion
        if piece is None:
            piece = "".join(ch.get("text") or "" for ch in ev.get("choices", []))
        if piece:
            pieces.append(piece)
            n_chunks += 1
            if t_first is None:
                t_first = now
            t_last = now
        usage = ev.get("usage") or usage
        timings = ev.get("timings") or timings
        if ev.get("stop"):
            final = ev
            break
    c.close()
    return {"text": "".join(pieces), "t_request": t0, "t_first": t_first, "t_last": t_last, "chunks": n_chunks,
            "usage": usage, "timings": timings, "final": final}


def cpu_times(pid):
    """(busy jiffies of the machine, all jiffies / CPUs, jiffies of process pid + this process)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    busy, every = v[0] + v[1] + v[2] + v[5] + v[6] + v[7], sum(v)
    ours = 0
    for p in (pid, os.getpid()):
        try:
            with open("/proc/%d/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ours += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return busy, every / (os.cpu_count() or 1), ours


def other_cpu(before, after):
    """Cores busy with other processes between two cpu_times (coarse: 10 ms ticks)."""
    wall = after[1] - before[1]
    return max(0.0, ((after[0] - before[0]) - (after[2] - before[2])) / wall) if wall > 0 else None


METRIC_LINE = re.compile(r"^(radixlm_spec[A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def spec_metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    r = c.getresponse()
    text = r.read().decode(errors="replace")
    out = {}
    for line in text.splitlines():
        m = METRIC_LINE.match(line)
        if m:
            try:
                out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
            except ValueError:
                pass
    return out


def spec_counts(diff):
    """(drafted, accepted) from radixlm_spec counter differences, by name (None if none)."""
    drafted = accepted = None
    for key, v in diff.items():
        name = key.split("{")[0]
        if re.search(r"_(bucket|sum|count)$", name) or "ratio" in name or "rate" in name or "length" in name:
            continue
        if "accept" in name:
            accepted = (accepted or 0) + v
        elif re.search(r"draft(ed)?(_tokens)?(_total)?$", name):
            drafted = (drafted or 0) + v
    return drafted, accepted


class RadixlmCli:
    """The `radixlm serve` flags this binary has."""

    def __init__(self, args, modes):
        r = subprocess.run([args.radixlm, "serve", "--help"], capture_output=True, text=True)
        help_text = r.stdout + r.stderr
        if r.returncode != 0 or "--port" not in help_text:
            raise SystemExit("`%s serve --help` failed (exit %d):\n%s" % (args.radixlm, r.returncode, help_text[-2000:]))
        self.has_speculate = re.search(r"--speculate\b", help_text) is not None
        self.draft_flag = None
        if not self.has_speculate:
            if any(m != "off" for m in modes):
                raise SystemExit(
                    "%s: `radixlm serve` has no --speculate flag (not in `radixlm serve --help`), so it cannot run "
                    "--radixlm-modes %s. Build the speculative-decoding radixlm first, or run --radixlm-modes off "
                    "(no speculation, no --speculate flag) or --engines llama.cpp." % (args.radixlm, ",".join(modes)))
            warn("radixlm serve has no --speculate: 'off' runs without the flag")
            return
        choices = re.search(r"--speculate\s+\S*\{([^}]*)\}", help_text)
        if choices:
            bad = [m for m in modes if m not in choices.group(1).split(",")]
            if bad:
                raise SystemExit("%s: `radixlm serve --speculate` takes %s, not %s" % (
                    args.radixlm, choices.group(1), ",".join(bad)))
        for cand in ("--draft-max", "--speculate-max", "--spec-draft-max", "--draft-tokens", "--speculate-tokens"):
            if re.search(re.escape(cand) + r"\b", help_text):
                self.draft_flag = cand
                break
        if self.draft_flag is None and any(m != "off" for m in modes):
            raise SystemExit("%s: `radixlm serve --help` has --speculate but no --draft-max (or a flag like it); "
                             "set RadixlmCli.draft_flag in this script" % args.radixlm)

    def command(self, args, port, mode):
        cmd = [args.radixlm, "serve", "-m", args.model, "--threads", str(args.threads), "--port", str(port)]
        if self.has_speculate:
            cmd += ["--speculate", mode]
            if mode != "off":
                cmd += [self.draft_flag, str(args.draft_max)]
        return cmd


def llama_modes_found(llama_server):
    r = subprocess.run([llama_server, "--help"], capture_output=True, text=True)
    m = re.search(r"--spec-type\s+(\S+)", r.stdout + r.stderr)
    if not m:
        return [], (r.stdout + r.stderr)
    return m.group(1).split(","), r.stdout + r.stderr


def parse_llama_config(spec, k):
    """'ngram-simple:size-n=3:size-m=K' -> (name, type, [flags])."""
    spec = spec.strip()
    typ, _, params = spec.partition(":")
    flags = []
    if typ != "none":
        flags = ["--spec-type", typ]
    names = []
    if params:
        sub = typ[len("ngram-"):] if typ.startswith("ngram-") else typ
        for kv in params.split(":"):
            key, _, val = kv.partition("=")
            val = str(k) if val == "K" else val
            flags += ["--spec-ngram-%s-%s" % (sub, key), val]
            names.append("%s=%s" % (key, val))
    name = typ + (" " + ",".join(names) if names else "")
    return name, typ, flags


def default_llama_configs():
    return ("none," + ",".join(LLAMA_MODES) + ",ngram-simple:size-n=3:size-m=K,ngram-map-k:size-n=3:size-m=K,"
            "ngram-map-k4v:size-n=3:size-m=K,ngram-mod:n-min=1:n-max=K")


def split_configs(text):
    return [p.strip() for p in text.split(",") if p.strip()]


# ---------------------------------------------------------------------------------------------
# one run

def run_one(cfg, kind, prompt, rnd, args, radix_cli, workdir):
    port = free_port()
    logpath = os.path.join(workdir, "%s_%s_r%d.log" % (re.sub(r"[^A-Za-z0-9_.=-]+", "_", cfg["id"]), kind, rnd))
    if cfg["engine"] == "llama.cpp":
        cmd = [args.llama_server, "-m", args.model, "--host", "127.0.0.1", "--port", str(port), "-t", str(args.threads),
               "-tb", str(args.threads), "-c", str(args.context), "-np", "1", "--no-webui"] + cfg["flags"]
    else:
        cmd = radix_cli.command(args, port, cfg["mode"])
    row = {"engine": cfg["engine"], "config": cfg["name"], "kind": kind, "round": rnd, "command": cmd}
    with open(logpath, "w") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_ready(port, proc, logpath)
        if cfg["engine"] == "llama.cpp":
            path = "/completion"
            common = {"temperature": 0, "cache_prompt": False, "ignore_eos": True, "stream": True}
            warm = dict(common, prompt=WARMUP_PROMPT, n_predict=WARMUP_TOKENS)
            body = dict(common, prompt=prompt, n_predict=args.max_tokens)
        else:
            path = "/v1/completions"
            common = {"temperature": 0, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
            warm = dict(common, prompt=WARMUP_PROMPT, max_tokens=WARMUP_TOKENS)
            body = dict(common, prompt=prompt, max_tokens=args.max_tokens)
        cpu0 = cpu_times(proc.pid)
        stream(port, path, warm)
        before = spec_metrics(port) if cfg["engine"] == "radixlm" else {}
        res = stream(port, path, body)
        row["other_cpu"] = other_cpu(cpu0, cpu_times(proc.pid))
        if proc.poll() is not None:
            raise RuntimeError("server exited with %d:\n%s" % (proc.returncode, tail(logpath)))
        if cfg["engine"] == "llama.cpp":
            t = res["timings"] or {}
            n = t.get("predicted_n") or (res["final"] or {}).get("tokens_predicted")
            row.update(prompt_tokens=t.get("prompt_n"), completion_tokens=n,
                       server_tok_s=t.get("predicted_per_second"), drafted=t.get("draft_n", 0),
                       accepted=t.get("draft_n_accepted", 0), timings=t)
        else:
            after = spec_metrics(port)
            diff = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
            drafted, accepted = spec_counts(diff)
            u = res["usage"] or {}
            row.update(prompt_tokens=u.get("prompt_tokens"), completion_tokens=u.get("completion_tokens"),
                       drafted=drafted, accepted=accepted, spec_metrics=after, spec_metrics_diff=diff)
        n = row["completion_tokens"] or res["chunks"]
        dt = (res["t_last"] - res["t_first"]) if res["t_first"] is not None else 0
        row.update(text=res["text"], ttft_s=(res["t_first"] - res["t_request"]) if res["t_first"] else None,
                   decode_s=dt, decode_tok_s=(n - 1) / dt if dt > 0 and n and n > 1 else None)
        if row["other_cpu"] is not None and row["other_cpu"] > args.max_other_cpu:
            warn("%s %s %s round %d: other processes used %.2f cores during the run: its figures are not "
                 "trustworthy" % (cfg["engine"], cfg["name"], kind, rnd, row["other_cpu"]))
        if row["completion_tokens"] is not None and row["completion_tokens"] != args.max_tokens:
            warn("%s %s %s round %d: %s tokens generated, not %d" % (cfg["engine"], cfg["name"], kind, rnd,
                                                                     row["completion_tokens"], args.max_tokens))
    finally:
        stop(proc)
    return row


# ---------------------------------------------------------------------------------------------
# report

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(rows, configs, kinds):
    summary = {}
    for kind in kinds:
        krows = [r for r in rows if r["kind"] == kind and "error" not in r]
        by = lambda cfg: [r for r in krows if r["engine"] == cfg["engine"] and r["config"] == cfg["name"]]
        base = {}
        for cfg in configs:
            if cfg["baseline"]:
                base[cfg["engine"]] = by(cfg)
        llama_plain = med(r["decode_tok_s"] for r in base.get("llama.cpp", []))
        out = []
        for cfg in configs:
            rs = by(cfg)
            tok_s = med(r["decode_tok_s"] for r in rs)
            own = med(r["decode_tok_s"] for r in base.get(cfg["engine"], []))
            drafted = [r.get("drafted") for r in rs if r.get("drafted") is not None]
            accepted = [r.get("accepted") for r in rs if r.get("accepted") is not None]
            gen = sum(r["completion_tokens"] or 0 for r in rs)
            plain_text = {r["round"]: r["text"] for r in base.get(cfg["engine"], [])}
            llama_text = {r["round"]: r["text"] for r in base.get("llama.cpp", [])}
            same_own = [] if cfg["baseline"] else [r["text"] == plain_text[r["round"]] for r in rs
                                                   if r["round"] in plain_text]
            same_llama = [r["text"] == llama_text[r["round"]] for r in rs if r["round"] in llama_text]
            out.append({
                "engine": cfg["engine"], "config": cfg["name"], "runs": len(rs),
                "errors": sum(1 for r in rows if r["kind"] == kind and r["engine"] == cfg["engine"]
                              and r["config"] == cfg["name"] and "error" in r),
                "decode_tok_s": tok_s, "decode_tok_s_all": [r["decode_tok_s"] for r in rs],
                "server_tok_s": med(r.get("server_tok_s") for r in rs),
                "vs_own_plain": tok_s / own if tok_s and own else None,
                "vs_llama_plain": tok_s / llama_plain if tok_s and llama_plain else None,
                "drafted": sum(drafted) if drafted else None, "accepted": sum(accepted) if accepted else None,
                "acceptance": sum(accepted) / sum(drafted) if drafted and accepted is not None and sum(drafted) else None,
                "accepted_per_generated": sum(accepted) / gen if accepted and gen else None,
                "same_text_as_own_plain": (sum(same_own), len(same_own)),
                "same_text_as_llama_plain": (sum(same_llama), len(same_llama)),
                "prompt_tokens": med(r.get("prompt_tokens") for r in rs),
                "ttft_s": med(r.get("ttft_s") for r in rs),
                "other_cpu_max": max([r["other_cpu"] for r in rs if r.get("other_cpu") is not None], default=None),
            })
        summary[kind] = out
    return summary


def fmt(x, f="%.1f", none="-"):
    return none if x is None else f % x


def agree(pair):
    ok, n = pair
    if n == 0:
        return "-"
    return "yes" if ok == n else "NO (%d/%d)" % (ok, n)


def print_tables(summary, header, prompts_info):
    print(header)
    for kind, out in summary.items():
        info = prompts_info[kind]
        print("\n### %s (prompt %s tokens, %d generated)\n" % (kind, info["tokens"], info["max_tokens"]))
        print("| engine | config | decode tok/s | vs own plain | vs llama.cpp plain | llama-server's tok/s | "
              "drafted | accepted | accepted % | accepted / generated | same text as own plain | same as llama.cpp plain |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for s in out:
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                s["engine"], s["config"] + (" (%d failed)" % s["errors"] if s["errors"] else ""),
                fmt(s["decode_tok_s"]), fmt(s["vs_own_plain"], "%.2fx"), fmt(s["vs_llama_plain"], "%.2fx"),
                fmt(s["server_tok_s"]), fmt(s["drafted"], "%d"), fmt(s["accepted"], "%d"),
                fmt(None if s["acceptance"] is None else 100 * s["acceptance"], "%.0f%%"),
                fmt(s["accepted_per_generated"], "%.2f"), agree(s["same_text_as_own_plain"]),
                agree(s["same_text_as_llama_plain"])))
    if WARNINGS:
        print("\nwarnings:")
        for w in WARNINGS:
            print("- " + w)


# ---------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--radixlm", default=os.path.join(ROOT, "build", "src", "cli", "radixlm"))
    ap.add_argument("--llama-server", default=os.path.join(ROOT, "build", "vs_llamacpp", "llama.cpp", "build", "bin",
                                                           "llama-server"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "kjv-qwen3.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--draft-max", type=int, default=8, help="radixlm --draft-max; K in --llama-configs")
    ap.add_argument("--continue-tokens", type=int, default=600, help="continue prompt size (fitted to the context)")
    ap.add_argument("--repeat-tokens", type=int, default=250, help="repeat passage size (fitted to the context)")
    ap.add_argument("--context", type=int, default=0,
                    help="the context prompt + answer must fit (default: the GGUF's context_length); llama-server -c")
    ap.add_argument("--engines", default="llama.cpp,radixlm")
    ap.add_argument("--radixlm-modes", default="off,ngram,tree")
    ap.add_argument("--llama-configs", default=None,
                    help="comma-separated TYPE or TYPE:key=v:key=v (flag --spec-ngram-<mode>-key v; v=K: --draft-max);"
                         " default: " + default_llama_configs())
    ap.add_argument("--kinds", default="continue,repeat")
    ap.add_argument("--max-other-cpu", type=float, default=0.3,
                    help="warn when other processes used more than this many cores during a run")
    ap.add_argument("--keep-logs", action="store_true", help="keep the servers' logs (their folder is printed)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.radixlm = os.path.abspath(args.radixlm)
    args.llama_server = os.path.abspath(args.llama_server)
    args.model = os.path.abspath(args.model)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    for e in engines:
        if e not in ("llama.cpp", "radixlm"):
            raise SystemExit("--engines: llama.cpp and/or radixlm, not %r" % e)
    if not os.path.exists(args.model):
        raise SystemExit("no model at %s" % args.model)

    # configurations
    configs, llama_found = [], []
    if "llama.cpp" in engines:
        if not os.access(args.llama_server, os.X_OK):
            raise SystemExit("no llama-server at %s (bench/vs_llamacpp.sh --build-only builds it)" % args.llama_server)
        llama_found, help_text = llama_modes_found(args.llama_server)
        if not llama_found:
            raise SystemExit("`llama-server --help` lists no --spec-type:\n" + help_text[-1500:])
        for spec in split_configs(args.llama_configs or default_llama_configs()):
            name, typ, flags = parse_llama_config(spec, args.draft_max)
            if typ != "none" and typ not in llama_found:
                warn("llama-server has no --spec-type %s (it has %s): skipped" % (typ, ",".join(llama_found)))
                continue
            bad = [f for f in flags[2::2] if f.startswith("--spec-ngram-") and f not in help_text]
            if bad:
                warn("llama-server has no %s: %s skipped" % (", ".join(bad), name))
                continue
            configs.append({"engine": "llama.cpp", "name": name, "id": "llama_" + name, "flags": flags,
                            "baseline": typ == "none"})
        if not any(c["baseline"] for c in configs if c["engine"] == "llama.cpp"):
            warn("no llama.cpp 'none' configuration: no llama.cpp plain baseline")
    radix_cli = None
    if "radixlm" in engines:
        if not os.access(args.radixlm, os.X_OK):
            raise SystemExit("no radixlm at %s" % args.radixlm)
        modes = [m.strip() for m in args.radixlm_modes.split(",") if m.strip()]
        radix_cli = RadixlmCli(args, modes)
        for m in modes:
            name = m if m == "off" else "%s K=%d" % (m, args.draft_max)
            configs.append({"engine": "radixlm", "name": name, "id": "radixlm_" + m, "mode": m, "baseline": m == "off"})
    # interleave the engines so that each engine's runs are spread over the round
    lc = [c for c in configs if c["engine"] == "llama.cpp"]
    rc = [c for c in configs if c["engine"] == "radixlm"]
    order = []
    for i in range(max(len(lc), len(rc))):
        order += lc[i:i + 1] + rc[i:i + 1]

    # prompts, fitted to the context
    model_ctx = gguf_context_length(args.model)
    if not args.context:
        args.context = model_ctx or 4096
    if args.max_tokens > args.context // 2:
        warn("max_tokens %d does not fit with a prompt in the context of %d: cut to %d" % (
            args.max_tokens, args.context, args.context // 2))
        args.max_tokens = args.context // 2
    budget = args.context - args.max_tokens - 2
    if args.continue_tokens > budget or args.repeat_tokens > budget:
        warn("context %d - %d generated tokens leaves %d prompt tokens: prompts cut (continue asked %d, repeat %d)"
             % (args.context, args.max_tokens, budget, args.continue_tokens, args.repeat_tokens))
    tok = Tokenizer(args)
    all_prompts = make_prompts(tok, args.continue_tokens, args.repeat_tokens, budget)
    prompts = {k: all_prompts[k] for k in kinds}
    prompts_info = {k: {"tokens": tok.count(p), "max_tokens": args.max_tokens, "prompt": p} for k, p in prompts.items()}
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    log("CPU %s; %s (context %s); prompts %s tokens (%s); %d configurations x %d kinds x %d rounds" % (
        cpu, os.path.basename(args.model), model_ctx, {k: v["tokens"] for k, v in prompts_info.items()}, tok.how,
        len(order), len(kinds), args.rounds))

    workdir = tempfile.mkdtemp(prefix="spec_vs_llamacpp_")
    rows = []
    t_start = time.time()
    try:
        for rnd in range(1, args.rounds + 1):
            seq = order if rnd % 2 else order[::-1]
            for kind in kinds:
                for cfg in seq:
                    t0 = time.time()
                    try:
                        row = run_one(cfg, kind, prompts[kind], rnd, args, radix_cli, workdir)
                    except (RuntimeError, OSError, ValueError, KeyError, http.client.HTTPException) as e:
                        row = {"engine": cfg["engine"], "config": cfg["name"], "kind": kind, "round": rnd,
                               "error": str(e)}
                        warn("%s %s %s round %d failed: %s" % (cfg["engine"], cfg["name"], kind, rnd, e))
                    rows.append(row)
                    if "error" not in row:
                        log("round %d %-8s %-9s %-34s %7s tok/s  drafted %s accepted %s  (%.1f s)" % (
                            rnd, kind, cfg["engine"], cfg["name"], fmt(row["decode_tok_s"]), fmt(row.get("drafted"), "%d"),
                            fmt(row.get("accepted"), "%d"), time.time() - t0))
    finally:
        if args.keep_logs:
            log("server logs in " + workdir)
        else:
            for f in os.listdir(workdir):
                os.remove(os.path.join(workdir, f))
            os.rmdir(workdir)
        for f in os.listdir(tok.tmp):
            os.remove(os.path.join(tok.tmp, f))
        os.rmdir(tok.tmp)

    summary = summarize(rows, order, kinds)
    # correctness notes
    for kind, out in summary.items():
        for s in out:
            ok, n = s["same_text_as_own_plain"]
            if n and ok != n:
                if s["engine"] == "radixlm":
                    warn("radixlm %s on %s: greedy text differs from --speculate off in %d of %d rounds" % (
                        s["config"], kind, n - ok, n))
                else:
                    warn("llama.cpp %s on %s: greedy text differs from llama.cpp without speculation in %d of %d "
                         "rounds" % (s["config"], kind, n - ok, n))
    header = ("CPU: %s; model %s (context %s, run with %d); %d threads; %d generated tokens (greedy, ignore_eos); "
              "radixlm --draft-max %d; medians over %d rounds, configurations alternated; decode tok/s = (tokens - 1) "
              "/ (last streamed token - first), on the client; llama-server's tok/s = its timings.predicted_per_second"
              % (cpu, os.path.basename(args.model), model_ctx, args.context, args.threads, args.max_tokens,
                 args.draft_max, args.rounds))
    if args.json:
        json.dump({"cpu": cpu, "model": args.model, "model_context": model_ctx, "context": args.context,
                   "threads": args.threads, "rounds": args.rounds, "max_tokens": args.max_tokens,
                   "draft_max": args.draft_max, "tokenizer": tok.how,
                   "llama_server": args.llama_server if "llama.cpp" in engines else None,
                   "llama_spec_types": llama_found, "radixlm": args.radixlm if "radixlm" in engines else None,
                   "radixlm_has_speculate": radix_cli.has_speculate if radix_cli else None,
                   "configs": [{k: v for k, v in c.items() if k != "id"} for c in order],
                   "prompts": prompts_info, "summary": summary, "runs": rows, "warnings": WARNINGS,
                   "seconds": time.time() - t_start}, sys.stdout, indent=1)
        print()
    else:
        print_tables(summary, header, prompts_info)
    if any("error" in r for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
