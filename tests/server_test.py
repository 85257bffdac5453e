"""End-to-end test of `radixlm serve` over loopback: concurrent streaming and non-streaming
clients, a multi-turn conversation whose cached_tokens grow, malformed requests answered with
4xx and a clear message, /metrics, and the server still serving afterwards.
Usage: server_test.py RADIXLM. Bounded: at most 16 clients, every request times out in 60 s."""
import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_ready(base):
    # Up to a minute: start-up under ThreadSanitizer (scripts/sanitize.sh tsan) takes several seconds.
    for _ in range(600):
        try:
            urllib.request.urlopen(base + "/health", timeout=1)
            return
        except Exception:
            time.sleep(0.1)


def post(base, path, body, raw=None, headers=None):
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, headers=dict({"Content-Type": "application/json"}, **(headers or {})))
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def raw_http(port, data):
    """Sends bytes as they are (framings urllib would not produce); returns the status line."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(data)
    out = b""
    try:
        while b"\r\n" not in out:
            chunk = s.recv(4096)
            if not chunk:
                break
            out += chunk
    finally:
        s.close()
    return out.split(b"\r\n")[0].decode(errors="replace")


def stream(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(dict(body, stream=True)).encode(),
                                 headers={"Content-Type": "application/json"})
    events = []
    with urllib.request.urlopen(req, timeout=60) as r:
        for line in r:
            line = line.decode().strip()
            if line.startswith("data: "):
                events.append(line[6:])
    return events


@contextlib.contextmanager
def serving(binary, args):
    """`radixlm serve ARGS` on a free port, for the tests that need their own server: yields its
    base URL once it answers /health, stops it afterwards."""
    port = free_port()
    server = subprocess.Popen([binary, "serve", "--port", str(port)] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = "http://127.0.0.1:%d" % port
        wait_ready(base)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


def verdict():
    """The last line and the exit status of a test built on check()."""
    print("FAILED: %d" % len(FAILURES) if FAILURES else "all passed")
    return 1 if FAILURES else 0


def metric(text, name):
    """A Prometheus value from /metrics text (-1 when absent)."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return -1


def check_scoring(base):
    """/v1/embeddings, /embed and /rerank: shapes, agreement between the routes, concurrent
    requests merged and deduplicated without changing a score, and clear errors."""
    import base64
    import math
    import struct
    texts = ["the cat sat on the mat", "a dog barked at the mailman", "cats sleep most of the day"]
    status, text = post(base, "/v1/embeddings", {"input": texts, "model": "random:tiny"})
    body = json.loads(text) if status == 200 else {}
    vecs = [d["embedding"] for d in body.get("data", [])]
    check(status == 200 and len(vecs) == 3 and all(len(v) == 64 for v in vecs) and body["usage"]["prompt_tokens"] > 0,
          "/v1/embeddings: one 64-d vector per input, usage counted")
    check(all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5 for v in vecs), "/v1/embeddings vectors are L2-normalised")
    status, text = post(base, "/v1/embeddings", {"input": texts[0], "encoding_format": "base64", "dimensions": 16})
    raw = base64.b64decode(json.loads(text)["data"][0]["embedding"]) if status == 200 else b""
    small = list(struct.unpack("<16f", raw)) if len(raw) == 64 else []
    norm16 = math.sqrt(sum(x * x for x in vecs[0][:16])) if vecs else 1
    check(len(small) == 16 and all(abs(a - b / norm16) < 1e-5 for a, b in zip(small, vecs[0][:16])),
          "/v1/embeddings base64 + dimensions = the leading dimensions, re-normalised")
    status, text = post(base, "/embed", {"inputs": texts})
    tei = json.loads(text) if status == 200 else []
    check(status == 200 and len(tei) == 3 and all(abs(a - b) < 1e-6 for u, v in zip(tei, vecs) for a, b in zip(u, v)),
          "/embed (TEI) returns the same vectors as /v1/embeddings")
    passages = ["A flea can live up to a year, about 100 days on average.", "Cats sleep a lot.",
                "Fleas are wingless insects.", "The mailman came at noon."] * 3
    query = {"query": "how long do fleas live", "texts": passages, "return_text": True}
    status, text = post(base, "/rerank", query)
    alone = json.loads(text) if status == 200 else []
    scores = [r["score"] for r in alone]
    check(status == 200 and len(alone) == 12 and scores == sorted(scores, reverse=True) and all(0 < x < 1 for x in scores)
          and all(r["text"] == passages[r["index"]] for r in alone), "/rerank: every text scored in (0, 1), sorted, texts returned")
    before = urllib.request.urlopen(base + "/metrics").read().decode()
    results = [None] * 8
    def worker(i):
        results[i] = post(base, "/rerank", query)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(all(r[0] == 200 and json.loads(r[1]) == alone for r in results),
          "8 concurrent /rerank requests get exactly the scores of the request alone")
    metrics = urllib.request.urlopen(base + "/metrics").read().decode()
    tokens = metric(metrics, "radixlm_scoring_tokens_total") - metric(before, "radixlm_scoring_tokens_total")
    computed = metric(metrics, "radixlm_scoring_computed_tokens_total") - metric(before, "radixlm_scoring_computed_tokens_total")
    check(0 < computed < 0.5 * tokens, "shared query prefix computed once: %d of %d rerank tokens computed" % (computed, tokens))
    bad = [
        ("/rerank", {"texts": ["x"]}, 422, "'query'"),
        ("/rerank", {"query": "q", "texts": []}, 422, "'texts'"),
        ("/rerank", {"query": "q", "texts": ["word " * 600]}, 413, "limit is 512"),
        ("/embed", {"inputs": 5}, 422, "'inputs'"),
        ("/embed", {"inputs": ["word " * 600]}, 413, "limit is 512"),
        ("/v1/embeddings", {"input": []}, 400, "'input'"),
        ("/v1/embeddings", {"input": "x", "encoding_format": "hex"}, 400, "encoding_format"),
        ("/v1/embeddings", {"input": ["word " * 600]}, 400, "limit is 512"),
        ("/v1/embeddings", {"input": [[1, 2, 999999999]]}, 400, "outside the vocabulary"),
        ("/v1/embeddings", {"input": "x", "encoding_format": 5}, 400, "'encoding_format' must be a string"),
        # 2^32 + 1 must not wrap to token 1 and be served as if it were.
        ("/v1/embeddings", {"input": [4294967297]}, 400, "'input' must be"),
        ("/v1/embeddings", {"input": [[1, 4294967297]]}, 400, "'input' must be"),
        # More inputs per request than --max-scoring-inputs (2048): refused, the limit named.
        ("/rerank", {"query": "q", "texts": ["x"] * 2049}, 413, "the limit is 2048"),
        ("/embed", {"inputs": ["x"] * 2049}, 413, "the limit is 2048"),
        ("/v1/embeddings", {"input": ["x"] * 2049}, 400, "the limit is 2048"),
    ]
    for path, req, want, words in bad:
        status, text = post(base, path, req)
        check(status == want and words in text, "%s %s -> %d %s" % (path, str(req)[:40], status, text[:90]))
    status, text = post(base, "/rerank", {"query": "q", "texts": ["word " * 600], "truncate": True})
    check(status == 200, "/rerank truncate=true cuts an over-long text instead")


def main():
    binary = sys.argv[1]
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    proc = subprocess.Popen([binary, "serve", "--model", "random:tiny", "--port", str(port), "--kv-tokens", "8192",
                             "--max-concurrent", "16", "--max-body-bytes", "100000",
                             "--scoring-batch-tokens", "512"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_ready(base)
        check(json.loads(urllib.request.urlopen(base + "/v1/models").read())["data"][0]["id"] == "random:tiny", "/v1/models")

        # Concurrent clients, half streaming.
        results = {}

        def client(i):
            body = {"model": "random:tiny", "messages": [{"role": "system", "content": "You are terse."},
                                                          {"role": "user", "content": "Question %d: why is the sky blue?" % i}],
                    "max_tokens": 6, "temperature": 0}
            if i % 2:
                ev = stream(base, "/v1/chat/completions", body)
                results[i] = ("stream", ev)
            else:
                results[i] = ("json", post(base, "/v1/chat/completions", body))
        threads = [threading.Thread(target=client, args=(i,)) for i in range(12)]
        [t.start() for t in threads]
        [t.join(90) for t in threads]
        ok_json = all(r[1][0] == 200 and json.loads(r[1][1])["usage"]["completion_tokens"] == 6
                      for r in results.values() if r[0] == "json")
        ok_stream = all(r[1][-1] == "[DONE]" and any('"usage"' in e for e in r[1]) for r in results.values() if r[0] == "stream")
        check(len(results) == 12 and ok_json and ok_stream, "12 concurrent clients (6 streaming) all completed")
        # Requests arriving together share the system prompt either through the cache (admitted
        # after another's prompt was inserted) or in the same step (its rows computed once):
        # which one depends on arrival timing, so either counts; a later request hits the cache.
        cached = [json.loads(r[1][1])["usage"]["prompt_tokens_details"]["cached_tokens"] for r in results.values() if r[0] == "json"]
        dedup = metric(urllib.request.urlopen(base + "/metrics").read().decode(), "radixlm_deduplicated_tokens_total")
        check(max(cached) > 0 or dedup > 0,
              "concurrent requests sharing a system prompt share it (cached %s, rows computed once %d)" % (cached, dedup))
        later = {"messages": [{"role": "system", "content": "You are terse."},
                              {"role": "user", "content": "One more question: why is grass green?"}], "max_tokens": 2}
        hit = json.loads(post(base, "/v1/chat/completions", later)[1])["usage"]["prompt_tokens_details"]["cached_tokens"]
        check(hit > 0, "a later request with the same system prompt hits the cache (%d tokens)" % hit)

        # Multi-turn: cached_tokens grow turn after turn.
        msgs, seen = [{"role": "system", "content": "You are a helpful assistant."}], []
        for turn in range(4):
            msgs.append({"role": "user", "content": "Turn %d: tell me more." % turn})
            status, text = post(base, "/v1/chat/completions", {"messages": msgs, "max_tokens": 4, "temperature": 0})
            out = json.loads(text)
            seen.append(out["usage"]["prompt_tokens_details"]["cached_tokens"])
            msgs.append({"role": "assistant", "content": out["choices"][0]["message"]["content"]})
        check(all(b > a for a, b in zip(seen, seen[1:])), "multi-turn cached_tokens grow: %s" % seen)

        # cache_salt: a tenant never hits another tenant's cached prompt; its own repeat hits.
        salted_prompt = "A tenant's private document that nobody else should find cached. " * 6
        def salted(salt):
            body = {"prompt": salted_prompt, "max_tokens": 2, "temperature": 0, "cache_salt": salt}
            return json.loads(post(base, "/v1/completions", body)[1])["usage"]["prompt_tokens_details"]["cached_tokens"]
        first, other, again = salted("tenant-1"), salted("tenant-2"), salted("tenant-1")
        check(first == 0 and other == 0 and again > 0, "cache_salt isolates tenants (cached %d, %d, then %d)" % (first, other, again))

        # Parallel sampling: n greedy choices equal the n = 1 answer; the prompt counts once.
        nbody = {"prompt": "Parallel sampling shares one prompt. " * 8, "max_tokens": 5, "temperature": 0}
        one = json.loads(post(base, "/v1/completions", nbody)[1])
        many = json.loads(post(base, "/v1/completions", dict(nbody, n=3))[1])
        check([c["index"] for c in many["choices"]] == [0, 1, 2] and
              all(c["text"] == one["choices"][0]["text"] for c in many["choices"]) and
              many["usage"]["prompt_tokens"] == one["usage"]["prompt_tokens"] and
              many["usage"]["completion_tokens"] == 3 * one["usage"]["completion_tokens"],
              "n = 3 greedy: three choices equal to n = 1, the prompt counted once (%s)" % many["usage"])
        sampled = json.loads(post(base, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Pick."}],
                                                                 "max_tokens": 8, "temperature": 1.0, "seed": 5, "n": 4})[1])
        check(len(sampled["choices"]) == 4 and len({c["message"]["content"] for c in sampled["choices"]}) > 1,
              "n = 4 sampled chat choices differ")
        # best_of: 4 samples drawn (seeds 11..14, each the n = 1 answer with that seed), the 2 most
        # likely returned, every sample's tokens counted.
        bbody = dict(nbody, temperature=1.0, seed=11, max_tokens=6)
        singles = [json.loads(post(base, "/v1/completions", dict(bbody, seed=11 + i))[1]) for i in range(4)]
        best = json.loads(post(base, "/v1/completions", dict(bbody, n=2, best_of=4))[1])
        texts = [x["choices"][0]["text"] for x in singles]
        check(len(best["choices"]) == 2 and all(c["text"] in texts for c in best["choices"]) and
              best["usage"]["completion_tokens"] == sum(x["usage"]["completion_tokens"] for x in singles),
              "best_of = 4, n = 2: two of the four seeded samples, all four counted (%s)" % best["usage"])
        code, body = post(base, "/v1/completions", dict(bbody, n=2, best_of=4, stream=True))
        check(code == 400 and "best_of" in body, "best_of > n with stream: 400")
        ev = stream(base, "/v1/completions", dict(nbody, n=2))
        idx = {json.loads(e)["choices"][0]["index"] for e in ev if e != "[DONE]" and json.loads(e)["choices"]}
        finished = [json.loads(e)["choices"][0] for e in ev if e != "[DONE]" and json.loads(e)["choices"] and
                    json.loads(e)["choices"][0]["finish_reason"]]
        check(idx == {0, 1} and len(finished) == 2 and ev[-1] == "[DONE]", "streaming n = 2: chunks of both choices, two finishes")

        # Content-Length with chunked encoding (request smuggling behind a proxy): refused.
        smuggle = b'{"prompt": "hi", "max_tokens": 2}'
        line = raw_http(port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"
                              % (len(smuggle), len(smuggle), smuggle))
        check(line.startswith("HTTP/1.1 400"), "Content-Length together with Transfer-Encoding -> 400 (%s)" % line)

        # Malformed requests: 4xx with a clear message, and the server keeps serving.
        cases = [
            ("invalid JSON", post(base, "/v1/completions", None, raw=b"{not json"), 400, "not valid JSON"),
            # A NUL byte must not end the body early with the rest ignored.
            ("NUL byte in the body", post(base, "/v1/completions", None, raw=b'{"prompt": "hi", "max_tokens": 2}\x00junk'), 400,
             "not valid JSON"),
            ("NUL byte in an embeddings body", post(base, "/v1/embeddings", None, raw=b'{"input": "a"}\x00junk'), 400,
             "not valid JSON"),
            ("wrong field type", post(base, "/v1/completions", {"prompt": "x", "max_tokens": "lots"}), 400, "'max_tokens'"),
            ("missing prompt", post(base, "/v1/completions", {"max_tokens": 3}), 400, "'prompt' is required"),
            ("unknown model", post(base, "/v1/completions", {"model": "gpt-9", "prompt": "x"}), 404, "does not exist"),
            ("prompt too long", post(base, "/v1/completions", {"prompt": [1] * 9000, "max_tokens": 8}), 400, "prompt is too long"),
            ("bad messages", post(base, "/v1/chat/completions", {"messages": "hi"}), 400, "'messages'"),
            ("bad role", post(base, "/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}), 400, "role"),
            ("token id out of range", post(base, "/v1/completions", {"prompt": [999999999]}), 400, "outside the vocabulary"),
            ("token id beyond int32", post(base, "/v1/completions", {"prompt": [4294967297]}), 400, "'prompt' must be"),
            # Integers that would narrow to another value, and values of another JSON type, are refused.
            ("max_tokens beyond int", post(base, "/v1/completions", {"prompt": "x", "max_tokens": 4294967297}), 400, "out of range"),
            ("max_tokens a boolean", post(base, "/v1/completions", {"prompt": "x", "max_tokens": True}), 400, "wrong type"),
            ("top_k a float", post(base, "/v1/completions", {"prompt": "x", "top_k": 2.5}), 400, "wrong type"),
            ("include_usage a string", post(base, "/v1/completions", {"prompt": "x", "stream_options": {"include_usage": "yes"}}),
             400, "'include_usage'"),
            ("image content part", post(base, "/v1/chat/completions", {"messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "x"}}]}]}), 400, "text only"),
            ("logprobs out of range", post(base, "/v1/completions", {"prompt": "x", "logprobs": 21}), 400, "[0, 20]"),
            ("echo on chat", post(base, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "echo": True}), 400, "echo"),
            ("tools on completions", post(base, "/v1/completions", {"prompt": "x", "tools": []}), 400, "chat/completions"),
            ("unsupported schema keyword", post(base, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
             "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "array", "uniqueItems": True}}}}),
             400, "uniqueItems"),
            ("bad grammar", post(base, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "grammar": "root ::= ("}),
             400, "grammar"),
            ("tool_choice names an unknown tool", post(base, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
             "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}}),
             400, "not in 'tools'"),
            ("body too large", post(base, "/v1/completions", None, raw=json.dumps({"prompt": "x" * 200000}).encode()), 413, ""),
            ("unknown route", post(base, "/v1/nothing", {}), 404, ""),
        ]
        for name, (status, text), want, needle in cases:
            try:
                err = json.loads(text)["error"]
                good = status == want and needle in err["message"]
            except Exception:
                good = False
            check(good, "%s -> %d %s" % (name, status, text[:100]))
        status, text = post(base, "/v1/completions", {"prompt": "Still there?", "max_tokens": 2})
        check(status == 200, "server keeps serving after malformed requests")
        # A stop string ends the text.
        status, text = post(base, "/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 8, "stop": ["\u0000never"]})
        check(status == 200 and json.loads(text)["choices"][0]["finish_reason"] == "length", "stop strings that never occur do not stop")

        # Options at their "off" values are accepted.
        status, _ = post(base, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1,
                                                        "response_format": {"type": "text"}, "logprobs": False})
        check(status == 200, "response_format text and logprobs false are accepted")
        # No seed: a fresh one per request; the same seed: the same sample.
        def sample(extra):
            status, text = post(base, "/v1/completions", dict({"prompt": [1, 2, 3], "max_tokens": 8, "temperature": 1.0,
                                                               "return_token_ids": True}, **extra))
            return json.loads(text)["choices"][0]["token_ids"] if status == 200 else None
        check(sample({}) != sample({}), "requests without a seed sample differently")
        check(sample({"seed": 5}) == sample({"seed": 5}) is not None, "requests with one seed sample alike")
        # A stream's chunks together carry every generated id, also those of tokens that add no
        # text. A stop string = the whole answer + a character it lacks holds every delta back
        # (each is a prefix of the stop string) until the end: only the last chunk has text.
        body = {"prompt": [1, 2, 3], "max_tokens": 24, "temperature": 0, "return_token_ids": True}
        status, text = post(base, "/v1/completions", body)
        answer = json.loads(text)["choices"][0]["text"] if status == 200 else ""
        body["stop"] = [answer + "\u0001"]
        status, text = post(base, "/v1/completions", body)
        whole = json.loads(text)["choices"][0]["token_ids"] if status == 200 else []
        streamed = [t for e in stream(base, "/v1/completions", body) if e != "[DONE]"
                    for c in json.loads(e)["choices"] for t in c.get("token_ids", [])]
        check(len(whole) == 24 and streamed == whole, "streamed token_ids equal the whole answer's (%d vs %d)" % (len(streamed), len(whole)))
        # Without max_tokens, a prompt near the request limit (the 8,192-token KV pool) gets what is left.
        status, text = post(base, "/v1/completions", {"prompt": [7] * 8150, "temperature": 0})
        usage = json.loads(text).get("usage", {}) if status == 200 else {}
        check(status == 200 and 0 < usage.get("completion_tokens", 0) <= 42,
              "no max_tokens and a long prompt: clamped to the room left (%d %s)" % (status, usage or text[:80]))
        # A max_tokens beyond the room left is cut to it (as llama-server does): finish reason length.
        status, text = post(base, "/v1/completions", {"prompt": [7] * 8150, "max_tokens": 10 ** 6, "temperature": 0})
        answer = json.loads(text) if status == 200 else {}
        check(status == 200 and 0 < answer.get("usage", {}).get("completion_tokens", 0) <= 42 and
              answer["choices"][0]["finish_reason"] == "length",
              "max_tokens beyond the context: cut to the room left (%d %s)" % (status, text[:120]))

        metrics = urllib.request.urlopen(base + "/metrics").read().decode()
        needed = ["radixlm_cache_hit_tokens_total", "radixlm_computed_tokens_total", "radixlm_kv_blocks_in_use",
                  "radixlm_queue_length", "radixlm_requests_total", "radixlm_step_seconds_total"]
        check(all(n in metrics for n in needed), "/metrics exposes hit tokens, computed tokens, blocks in use, queue, steps")
        # The same under vLLM's names, labelled by model, agreeing with ours.
        def vllm_metric(name):
            for line in metrics.splitlines():
                if line.startswith(name + '{model_name="random:tiny"} '):
                    return float(line.split()[-1])
            return -1
        check(vllm_metric("vllm:prefix_cache_hits_total") == metric(metrics, "radixlm_cache_hit_tokens_total") > 0 and
              vllm_metric("vllm:prefix_cache_queries_total") == metric(metrics, "radixlm_prompt_tokens_total") and
              vllm_metric("vllm:num_requests_running") >= 0 and vllm_metric("vllm:num_requests_waiting") >= 0 and
              0 < vllm_metric("vllm:kv_cache_usage_perc") <= 1,
              "/metrics under vLLM's names agrees with radixlm's")
        info = json.loads(urllib.request.urlopen(base + "/server_info").read().decode())
        check(info.get("block_size") == 16 and info.get("max_model_len", 0) > 0 and info.get("model") == "random:tiny" and
              "kv_events" in info and info.get("limits", {}).get("max_total_tokens") == 131072,
              "/server_info: block size, context, model, events endpoint, limits (%s)" % json.dumps(info)[:160])
        check_scoring(base)
        # An API key, when configured, is required on every route but /health.
        port2 = free_port()
        keyed = subprocess.Popen([binary, "serve", "--model", "random:tiny", "--port", str(port2), "--kv-tokens", "1024",
                                  "--api-key", "sekret"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            base2 = "http://127.0.0.1:%d" % port2
            wait_ready(base2)
            status, text = post(base2, "/v1/completions", {"prompt": "x", "max_tokens": 1})
            check(status == 401 and "API key" in text, "missing API key -> 401")
            status, _ = post(base2, "/v1/completions", {"prompt": "x", "max_tokens": 1}, headers={"Authorization": "Bearer sekret"})
            check(status == 200, "right API key -> 200")
        finally:
            keyed.terminate()
            keyed.wait(10)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    print("1 passed, 0 failed" if not FAILURES else "0 passed, 1 failed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
