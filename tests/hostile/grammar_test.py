#!/usr/bin/env python3
"""Issue 45's probe, served: requests whose grammar, schema or body once killed the server or
stalled every client. Each must now be refused (400, naming the bound) or served, the server
must stay up, and a 2-token request sent alongside must keep its latency: the p99 of those side
requests during the costly ones at most 2x their quiet p99 (plus a 50 ms floor for a quiet
value of a few milliseconds, where one scheduling slice is already 2x).

Usage: grammar_test.py RADIXLM"""
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check, finish, free_port, serve, stop, rss_mib  # noqa: E402


def post(base, body, timeout=60):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(base + "/v1/chat/completions", data=data, headers={"Content-Type": "application/json"})
    t0 = time.time()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace"), time.time() - t0
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace"), time.time() - t0
    except Exception as e:  # the server died or stalled
        return None, repr(e), time.time() - t0


def chat(extra, max_tokens=8):
    b = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens}
    b.update(extra)
    return b


def schema(s):
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": s}}}


def raw_body_with_keys(n):
    return ('{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"x":{' +
            ",".join('"k%d":1' % i for i in range(n)) + "}}").encode()


# (name, body, statuses allowed, text the answer must contain)
CASES = [
    ("nested groups 100k deep (was SIGSEGV)", chat({"grammar": "root ::= " + "(" * 100000 + '"a"' + ")" * 100000}),
     {400}, "nest more than"),
    ("100k alternatives (was: no answer, +808 MiB)",
     chat({"grammar": "root ::= " + " | ".join('"w%d"' % i for i in range(100000))}), {400}, "budget"),
    ("30k alternatives (was 2.2 s of mask per token)",
     chat({"grammar": "root ::= " + " | ".join('"w%d"' % i for i in range(30000))}), {400}, "budget"),
    ("a chain of 100k rules (was: no answer, +896 MiB)",
     chat({"grammar": "root ::= r0\n" + "".join("r%d ::= r%d\n" % (i, i + 1) for i in range(100000)) + 'r100000 ::= "a"\n'}),
     {400}, "rules"),
    ("an empty language (was 500 mid-generation)", chat({"grammar": "root ::= [^\\x00-\\U0010FFFF]"}), {400}, "empty"),
    ("minItems 2^64 (was silently dropped)",
     b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"response_format":{"type":"json_schema",'
     b'"json_schema":{"name":"x","schema":{"type":"array","minItems":18446744073709551616}}}}', {400}, "minItems"),
    ("an enum of 30k strings (others waited 6.5 s)", chat(schema({"enum": ["s%d" % i for i in range(30000)]})), {200}, "\"s"),
    ("an enum of 100k strings (was: no answer)", chat(schema({"enum": ["s%d" % i for i in range(100000)]})), {200}, "\"s"),
    ("a required property named with 1 MB (was: no answer)",
     chat(schema({"type": "object", "properties": {"a" * (1 << 20): {"type": "string"}}, "required": ["a" * (1 << 20)]})),
     {400}, "would exceed"),
    ("a body of 150k keys (was 30.6 s of a core)", raw_body_with_keys(150000), {400}, "Unrecognized request argument"),
    ("a body of 500k keys, 5.9 MB (was: no answer)", raw_body_with_keys(500000), {400}, "Unrecognized request argument"),
]


def side_latencies(base, seconds, out):
    """2-token requests back to back for `seconds`, and at least one: their latencies into `out`."""
    end = time.time() + seconds
    while True:
        status, _, dt = post(base, chat({}, max_tokens=2), timeout=30)
        out.append(dt if status == 200 else float("inf"))
        if time.time() >= end:
            break


def run_case(base, body):
    """The case's request with 2-token requests alongside: (status, text, seconds, their latencies)."""
    side = []
    result = {}
    t = threading.Thread(target=lambda: result.update(r=post(base, body)))
    t.start()
    side_latencies(base, 0.0, side)  # one at once, however fast the case is
    while t.is_alive():
        side_latencies(base, 0.05, side)
    t.join()
    return result["r"] + (side,)


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))] if xs else float("inf")


def main():
    binary = sys.argv[1]
    port = free_port()
    proc, base = serve(binary, ["-m", "random:tiny", "--threads", "2", "--max-body-bytes", str(8 << 20)], port)
    try:
        quiet = []
        side_latencies(base, 3.0, quiet)
        quiet_p99 = p99(quiet)
        check(len(quiet) > 5 and quiet_p99 < 1.0, "quiet 2-token requests: %d, p99 %.1f ms" % (len(quiet), 1000 * quiet_p99))
        rss0 = rss_mib(proc.pid)
        bound = max(2 * quiet_p99, quiet_p99 + 0.05)
        for name, body, statuses, want in CASES:
            status, text, dt, side = run_case(base, body)
            check(status in statuses and want in text,
                  "%s: %s in %.2f s (%s)" % (name, status, dt, text[:150].replace("\n", " ")))
            # A stall the case causes (the probe's were seconds) shows again when the case runs
            # again; one slow side request on a loaded 2-core machine (the suite runs two tests at
            # a time) does not: over the bound, the case runs once more and its better run counts.
            first = p99(side)
            if first > bound:
                side = run_case(base, body)[3]
            check(p99(side) <= bound, "%s: side 2-token requests p99 %.1f ms <= %.1f ms (%d of them%s)" %
                  (name, 1000 * p99(side), 1000 * bound, len(side),
                   "" if first <= bound else "; %.1f ms in the first run" % (1000 * first)))
            check(proc.poll() is None, "%s: the server is up" % name)
            if proc.poll() is not None:
                break
        check(rss_mib(proc.pid) - rss0 < 600, "RSS grew %.0f MiB over the cases" % (rss_mib(proc.pid) - rss0))
    finally:
        stop(proc)
    finish()


if __name__ == "__main__":
    main()
