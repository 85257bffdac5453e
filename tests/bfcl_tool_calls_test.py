#!/usr/bin/env python3
"""Tool calls on the Berkeley Function Calling Leaderboard sets (../shared/data/tool_calls,
`simple` and `multiple`; SKIPPED without them) against `radixlm serve -m random:tiny` (Qwen3's
template, hermes calls) and `radixlm serve -m random:lfm2-tiny` with LFM2.5's template
(../shared/data/chat_templates: pythonic calls, <|tool_call_start|>[f(a=1)]<|tool_call_end|>),
with tool_choice "required": every response that finishes parses into
calls of the offered functions whose arguments validate against the function's parameters
(python3-jsonschema; BFCL's types mapped to JSON Schema as its OpenAI handler maps them), and a
response cut by max_tokens is the start of a call. Two requests with the same tools share
their prompt prefix (cached_tokens). Prints the share of responses that finished.

Usage: bfcl_tool_calls_test.py RADIXLM [--per-set N] [--max-tokens M]
"""
import argparse
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_test import check, free_port, post, wait_ready, FAILURES  # noqa: E402
from agent_api_test import strict  # noqa: E402  (objects closed, as the server constrains tool arguments)

try:
    import jsonschema
except ImportError:
    print("SKIPPED: python3-jsonschema is not installed")
    sys.exit(77)

TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def to_json_schema(s):
    """BFCL's parameter schemas -> JSON Schema (dict -> object, float -> number, tuple -> array)."""
    if isinstance(s, list):
        return [to_json_schema(x) for x in s]
    if not isinstance(s, dict):
        return s
    out = {}
    for k, v in s.items():
        if k == "type" and isinstance(v, str):
            t = TYPES.get(v, v)
            if t:
                out["type"] = t
        elif k == "optional":
            continue
        elif k in ("properties",):
            out[k] = {name: to_json_schema(x) for name, x in v.items()}
        elif k in ("items", "additionalProperties"):
            out[k] = to_json_schema(v)
        else:
            out[k] = v
    return out


def run_server(args, ddir, model, extra, cut_prefix, totals):
    """Serves `model` and sends the sets' requests, adding to `totals`."""
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    server = subprocess.Popen([args.binary, "serve", "-m", model, "--port", str(port), "--kv-tokens", "32768"] + extra,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(base)
        for name in ("simple", "multiple"):
            entries = [json.loads(line) for line in open(os.path.join(ddir, name + ".jsonl"))]
            rng = random.Random(7)
            for e in rng.sample(entries, min(args.per_set, len(entries))):
                one_request(base, model, e, args, cut_prefix, totals)
            # The same tools and question twice: the second shares the rendered prefix.
            e = entries[0]
            body = {"messages": e["question"][0], "tools": bfcl_tools(e), "tool_choice": "required", "max_tokens": 1}
            post(base, "/v1/chat/completions", body)
            _, text = post(base, "/v1/chat/completions", body)
            u = json.loads(text)["usage"]
            check(u["prompt_tokens_details"]["cached_tokens"] >= u["prompt_tokens"] - 16,
                  "%s %s: same tools, shared prefix (%d of %d prompt tokens cached)" %
                  (model, name, u["prompt_tokens_details"]["cached_tokens"], u["prompt_tokens"]))
    finally:
        server.terminate()
        server.wait(timeout=30)


def bfcl_tools(e):
    return [{"type": "function", "function": {"name": f["name"], "description": f["description"],
                                              "parameters": to_json_schema(f["parameters"])}} for f in e["function"]]


def one_request(base, model, e, args, cut_prefix, totals):
    """One BFCL entry with tool_choice required: calls of the offered tools, valid arguments."""
    tools = bfcl_tools(e)
    body = {"messages": e["question"][0], "tools": tools, "tool_choice": "required", "max_tokens": args.max_tokens,
            "seed": 1, "parallel_tool_calls": False, "chat_template_kwargs": {"enable_thinking": False}}
    status, text = post(base, "/v1/chat/completions", body)
    r = json.loads(text)
    if status != 200:
        totals["refused"] += 1
        check(False, "%s %s: refused %d %s" % (model, e["id"], status, text[:200]))
        return
    c = r["choices"][0]
    if c["finish_reason"] != "tool_calls":
        totals["cut"] += 1
        check(c["finish_reason"] == "length" and c["message"]["content"].startswith(cut_prefix),
              "%s %s: cut by max_tokens inside a call" % (model, e["id"]))
        return
    totals["finished"] += 1
    ok = bool(c["message"]["tool_calls"])
    for call in c["message"]["tool_calls"]:
        fn = next((t for t in tools if t["function"]["name"] == call["function"]["name"]), None)
        try:
            jsonschema.validate(json.loads(call["function"]["arguments"]), strict(fn["function"]["parameters"]))
        except Exception as ex:  # noqa: BLE001
            ok = False
            print("   %s %s: %s" % (model, e["id"], str(ex)[:200]))
    if not ok:
        totals["invalid"] += 1
    check(ok, "%s %s: %d call(s), arguments valid against the parameters" % (model, e["id"], len(c["message"]["tool_calls"])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--per-set", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=256)
    args = ap.parse_args()
    shared = os.environ.get("RADIXLM_SHARED_DATA", "")
    ddir = os.path.join(shared, "tool_calls")
    if not shared or not os.path.exists(os.path.join(ddir, "simple.jsonl")):
        print("SKIPPED: %s absent" % ddir)
        return 77
    templates = os.path.join(shared, "chat_templates")
    # (model, extra serve arguments, how an output cut inside a call starts)
    servers = [("random:tiny", [], "<tool_call>\n{\"name\": \""),
               ("random:lfm2-tiny", ["--chat-template", os.path.join(templates, "LFM2.5-Instruct.jinja")],
                "<|tool_call_start|>[")]
    totals = {"finished": 0, "cut": 0, "invalid": 0, "refused": 0}
    for model, extra, cut_prefix in servers:
        run_server(args, ddir, model, extra, cut_prefix, totals)
    n = totals["finished"] + totals["cut"]
    print("BFCL: %d requests, %d finished with calls (%.0f%%), %d cut by max_tokens %d, %d invalid, %d refused" %
          (n, totals["finished"], 100.0 * totals["finished"] / max(n, 1), totals["cut"], args.max_tokens, totals["invalid"],
           totals["refused"]))
    print("FAILED: %d" % len(FAILURES) if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
