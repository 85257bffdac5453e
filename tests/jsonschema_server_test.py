#!/usr/bin/env python3
"""response_format json_schema end to end on JSONSchemaBench (../shared/data/jsonschema; SKIPPED
without it): schemas sampled from each category are sent to `radixlm serve -m random:tiny` (a
random-weight model under the constraint); every output that finishes (finish_reason "stop")
validates against its schema with python3-jsonschema (the schema's own draft), every output
cut by max_tokens is a prefix of a valid document (`radixlm grammar --check`), and a schema the
compiler refuses is a 400 naming the keyword. Prints per category: sent, refused, finished,
cut.

Usage: jsonschema_server_test.py RADIXLM [--per-category N] [--max-tokens M]
"""
import argparse
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_test import check, free_port, post, wait_ready, FAILURES  # noqa: E402
from agent_api_test import grammar_prefix_ok  # noqa: E402

try:
    import jsonschema
except ImportError:
    print("SKIPPED: python3-jsonschema is not installed")
    sys.exit(77)


def prefix_ok(binary, schema, text):
    ok = grammar_prefix_ok(binary, schema, [text])
    return ok == [True]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--per-category", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=96)
    args = ap.parse_args()
    shared = os.environ.get("RADIXLM_SHARED_DATA", "")
    ddir = os.path.join(shared, "jsonschema")
    if not shared or not os.path.isdir(ddir):
        print("SKIPPED: %s absent" % ddir)
        return 77
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    server = subprocess.Popen([args.binary, "serve", "-m", "random:tiny", "--port", str(port), "--kv-tokens", "16384"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(base)
        for cat in ("Glaiveai2K", "Github_easy", "Kubernetes"):
            lines = [json.loads(x) for x in open(os.path.join(ddir, cat + ".jsonl"))]
            rng = random.Random(11)
            counts = {"sent": 0, "refused": 0, "finished": 0, "cut": 0}
            for entry in rng.sample(lines, args.per_category):
                schema = entry["schema"]
                counts["sent"] += 1
                status, text = post(base, "/v1/chat/completions", {
                    "messages": [{"role": "user", "content": "JSON"}], "max_tokens": args.max_tokens, "seed": 1,
                    "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
                    "chat_template_kwargs": {"enable_thinking": False}})
                body = json.loads(text)
                if status == 400:
                    counts["refused"] += 1
                    check("unsupported" in body["error"]["message"] or "no value" in body["error"]["message"]
                          or "json schema" in body["error"]["message"],
                          "%s/%s: refused with a reason (%s)" % (cat, entry["id"], body["error"]["message"][:120]))
                    continue
                c = body["choices"][0]
                out = c["message"]["content"]
                if c["finish_reason"] == "stop":
                    counts["finished"] += 1
                    try:
                        cls = jsonschema.validators.validator_for(schema)
                        cls(schema).validate(json.loads(out))
                        ok = True
                    except Exception as e:  # noqa: BLE001
                        ok = False
                        print("   %s: %s" % (entry["id"], str(e)[:300]))
                    check(ok, "%s/%s: finished output validates" % (cat, entry["id"]))
                else:
                    counts["cut"] += 1
                    check(prefix_ok(args.binary, schema, out), "%s/%s: cut output is a prefix of a valid document" % (cat, entry["id"]))
            print("%-12s %s" % (cat, counts))
    finally:
        server.terminate()
        server.wait(timeout=30)
    print("FAILED: %d" % len(FAILURES) if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
