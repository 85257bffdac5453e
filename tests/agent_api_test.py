#!/usr/bin/env python3
"""What agent clients send, end to end against `radixlm serve` (random:tiny: the Qwen3 tokenizer
and Qwen3's own chat template, so hermes tool calls and <think> reasoning):

- tool_choice "required" / a named function: every finished response parses into calls of the
  offered functions whose arguments validate against their parameters (python3-jsonschema); a
  response cut by max_tokens is the start of a call;
- streaming the same request (same seed) gives the same message, tool_calls assembled from
  delta.tool_calls;
- a tool-call loop (call, tool result, answer) renders the history with the template;
- two requests with the same tools and system prompt share their prefix (cached_tokens);
- response_format json_schema (strict) / json_object and a GBNF `grammar`: finished outputs
  validate, cut ones are prefixes (the grammar tool says so);
- logprobs / top_logprobs (chat and completions, streamed too), echo;
- a 4-turn chat re-sending each reply: every turn hits the whole previous turn (turn memory), and
  recomputes less of it than a server started with --no-turn-reuse.

Usage: agent_api_test.py RADIXLM
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_test import check, post, serving, stream, verdict  # noqa: E402

try:
    import jsonschema
except ImportError:
    print("SKIPPED: python3-jsonschema is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                                                    "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                   "required": ["city", "unit"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {"q": {"type": "string", "maxLength": 10}, "top": {"type": "boolean"}},
                   "required": ["q"]}}}
TOOLS = [WEATHER, SEARCH]


def strict(schema):
    """The schema as the server constrains tool arguments (objects closed)."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (v if k in ("enum", "const", "default") else strict(v)) for k, v in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def chat(base, body):
    status, text = post(base, "/v1/chat/completions", body)
    return status, json.loads(text)


def assemble(events):
    """A streamed chat choice as one message: content, reasoning, tool_calls by index."""
    msg = {"content": "", "reasoning_content": "", "tool_calls": {}}
    finish, logprobs = None, []
    for e in events:
        if e == "[DONE]":
            continue
        j = json.loads(e)
        for c in j.get("choices", []):
            d = c.get("delta", {})
            msg["content"] += d.get("content") or ""
            msg["reasoning_content"] += d.get("reasoning_content") or ""
            for tc in d.get("tool_calls") or []:
                slot = msg["tool_calls"].setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
                slot["id"] += tc.get("id") or ""
                fn = tc.get("function") or {}
                slot["name"] += fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""
            if c.get("logprobs"):
                logprobs += c["logprobs"]["content"]
            finish = c.get("finish_reason") or finish
    return msg, finish, logprobs


def check_tool_calls(base):
    finished = cut = 0
    for seed in range(12):
        body = {"messages": [{"role": "system", "content": "You call tools."}, {"role": "user", "content": "Weather in Oslo?"}],
                "tools": TOOLS, "tool_choice": "required", "max_tokens": 160, "temperature": 1.0, "seed": seed,
                "chat_template_kwargs": {"enable_thinking": False}, "parallel_tool_calls": seed % 2 == 0}
        status, r = chat(base, body)
        if status != 200:
            check(False, "tool_choice required answered (%d %s)" % (status, r))
            return
        c = r["choices"][0]
        if c["finish_reason"] == "tool_calls":
            finished += 1
            ok = True
            for call in c["message"]["tool_calls"]:
                fn = next(t for t in TOOLS if t["function"]["name"] == call["function"]["name"])
                try:
                    jsonschema.validate(json.loads(call["function"]["arguments"]), strict(fn["function"]["parameters"]))
                except Exception as e:  # noqa: BLE001
                    ok = False
                    print("   invalid call %s: %s" % (call, e))
                ok = ok and call["id"].startswith("call_") and call["type"] == "function"
            check(ok and c["message"]["content"] is None, "seed %d: tool_calls valid against the parameters" % seed)
            if not (seed % 2 == 0):
                check(len(c["message"]["tool_calls"]) == 1, "parallel_tool_calls false: one call")
            # The same request streamed gives the same message.
            msg, finish, _ = assemble(stream(base, "/v1/chat/completions", body))
            calls = [msg["tool_calls"][i] for i in sorted(msg["tool_calls"])]
            same = finish == "tool_calls" and [(x["name"], x["arguments"], x["id"]) for x in calls] == \
                [(x["function"]["name"], x["function"]["arguments"], x["id"]) for x in c["message"]["tool_calls"]]
            check(same, "seed %d: streamed delta.tool_calls = the non-streamed tool_calls" % seed)
        else:
            cut += 1
            check(c["finish_reason"] == "length" and (c["message"]["content"] or "").startswith("<tool_call>\n{\"name\": \"")
                  and not c["message"].get("reasoning_content"),
                  "seed %d: cut by max_tokens inside a call" % seed)
    check(finished >= 3, "%d of 12 forced calls finished within max_tokens (%d cut)" % (finished, cut))
    # A named function: every finished call is that one.
    for seed in range(4):
        status, r = chat(base, {"messages": [{"role": "user", "content": "find cats"}], "tools": TOOLS, "max_tokens": 120,
                                "tool_choice": {"type": "function", "function": {"name": "search"}}, "seed": seed,
                                "chat_template_kwargs": {"enable_thinking": False}})
        c = r["choices"][0]
        if c["finish_reason"] == "tool_calls":
            check(all(t["function"]["name"] == "search" for t in c["message"]["tool_calls"]), "named tool_choice calls 'search'")


def check_tool_loop_and_sharing(base):
    history = [{"role": "system", "content": "You are a weather bot. " * 20}, {"role": "user", "content": "Weather in Oslo?"}]
    status, r1 = chat(base, {"messages": history, "tools": TOOLS, "max_tokens": 8, "seed": 1})
    check(status == 200, "auto tool_choice with tools answered")
    call = {"id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"unit\": \"celsius\"}"}}
    history2 = history + [{"role": "assistant", "content": None, "tool_calls": [call]},
                          {"role": "tool", "tool_call_id": "call_abc", "content": "{\"temp\": 3}"}]
    status, r2 = chat(base, {"messages": history2, "tools": TOOLS, "max_tokens": 8, "seed": 1})
    check(status == 200, "a history with a tool call and its result renders and answers")
    cached = r2["usage"]["prompt_tokens_details"]["cached_tokens"]
    check(cached >= r1["usage"]["prompt_tokens"] - 16,
          "same tools and system prompt: the next turn reuses the cached prefix (%d of %d prompt tokens; first turn %d)" %
          (cached, r2["usage"]["prompt_tokens"], r1["usage"]["prompt_tokens"]))
    status, r3 = chat(base, {"messages": history, "tools": TOOLS, "tool_choice": "none", "max_tokens": 4})
    check(status == 200 and "tool_calls" not in r3["choices"][0]["message"], "tool_choice none: no tool_calls")


def grammar_prefix_ok(binary, schema, texts):
    """Each text is a prefix the compiled schema accepts (the grammar tool's --check)."""
    with tempfile.TemporaryDirectory() as d:
        sp, tp = os.path.join(d, "s.json"), os.path.join(d, "t.jsonl")
        json.dump(schema, open(sp, "w"))
        with open(tp, "w") as f:
            for t in texts:
                f.write(json.dumps(t) + "\n")
        p = subprocess.run([binary, "grammar", "--schema", sp, "--check", tp], capture_output=True, text=True)
        if p.returncode != 0:
            return None
        return [json.loads(line)["prefix"] for line in p.stdout.splitlines()]


def check_structured(base, binary):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                               "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 3},
                                               "n": {"type": "integer"}},
              "required": ["name", "tags", "n"]}
    finished, cut_texts = 0, []
    for seed in range(8):
        status, r = chat(base, {"messages": [{"role": "user", "content": "JSON please"}], "max_tokens": 96, "seed": seed,
                                "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}},
                                "chat_template_kwargs": {"enable_thinking": False}})
        c = r["choices"][0]
        if c["finish_reason"] == "stop":
            finished += 1
            try:
                jsonschema.validate(json.loads(c["message"]["content"]), strict(schema))
                ok = True
            except Exception as e:  # noqa: BLE001
                ok = False
                print("   invalid: %r %s" % (c["message"]["content"], e))
            check(ok, "seed %d: json_schema output validates" % seed)
        else:
            cut_texts.append(c["message"]["content"])
    check(finished >= 2, "%d of 8 json_schema outputs finished" % finished)
    if cut_texts:
        ok = grammar_prefix_ok(binary, strict(schema), cut_texts)
        check(ok is not None and all(ok), "%d outputs cut by max_tokens are prefixes of valid documents" % len(cut_texts))
    # n > 1: each sample has its own matcher (the samples decode as one cascade group).
    status, r = chat(base, {"messages": [{"role": "user", "content": "JSON please"}], "max_tokens": 96, "seed": 5, "n": 3,
                            "temperature": 1.0, "chat_template_kwargs": {"enable_thinking": False},
                            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}}})
    ok = status == 200 and len(r["choices"]) == 3
    for c in r["choices"] if ok else []:
        if c["finish_reason"] == "stop":
            try:
                jsonschema.validate(json.loads(c["message"]["content"]), strict(schema))
            except Exception:  # noqa: BLE001
                ok = False
        else:
            ok = ok and grammar_prefix_ok(binary, strict(schema), [c["message"]["content"]]) == [True]
    check(ok and len({c["message"]["content"] for c in r["choices"]}) > 1, "n = 3 under one schema: three different valid samples")
    status, r = chat(base, {"messages": [{"role": "user", "content": "x"}], "max_tokens": 64, "seed": 3,
                            "response_format": {"type": "json_object"}, "chat_template_kwargs": {"enable_thinking": False}})
    c = r["choices"][0]
    check(status == 200 and c["message"]["content"].lstrip().startswith("{"), "json_object output starts an object")
    if c["finish_reason"] == "stop":
        check(isinstance(json.loads(c["message"]["content"]), dict), "json_object output is an object")
    status, r = chat(base, {"messages": [{"role": "user", "content": "x"}], "max_tokens": 8, "seed": 2,
                            "grammar": "root ::= (\"yes\" | \"no\") \" \" [0-9]", "chat_template_kwargs": {"enable_thinking": False}})
    out = r["choices"][0]["message"]["content"]
    check(status == 200 and out in ["%s %d" % (w, k) for w in ("yes", "no") for k in range(10)], "GBNF grammar output %r" % out)


def check_logprobs(base, binary):
    status, r = chat(base, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6, "temperature": 0,
                            "logprobs": True, "top_logprobs": 3, "chat_template_kwargs": {"enable_thinking": False}})
    c = r["choices"][0]
    entries = c["logprobs"]["content"]
    ok = len(entries) == r["usage"]["completion_tokens"] - (1 if c["finish_reason"] == "stop" else 0)
    for e in entries:
        tops = e["top_logprobs"]
        ok = ok and len(tops) == 3 and all(tops[i]["logprob"] >= tops[i + 1]["logprob"] for i in range(2))
        ok = ok and abs(tops[0]["logprob"] - e["logprob"]) < 1e-6 and e["logprob"] <= 0  # greedy: the best token
        ok = ok and bytes(e["bytes"]).decode("utf-8", "replace") == e["token"].replace("\ufffd", "\ufffd")
    check(status == 200 and ok, "chat logprobs: an entry per token, top_logprobs sorted, greedy picks the top")
    _, _, streamed = assemble(stream(base, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6,
                                                                 "temperature": 0, "logprobs": True, "top_logprobs": 3,
                                                                 "chat_template_kwargs": {"enable_thinking": False}}))
    check([e["token"] for e in streamed] == [e["token"] for e in entries], "streamed logprobs = non-streamed")
    status, text = post(base, "/v1/completions", {"prompt": "Hello", "max_tokens": 4, "logprobs": 2, "temperature": 0})
    lp = json.loads(text)["choices"][0]["logprobs"]
    check(status == 200 and len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]) > 0,
          "completions logprobs: tokens, token_logprobs, top_logprobs, text_offset")
    status, text = post(base, "/v1/completions", {"prompt": "Hello", "max_tokens": 2, "echo": True})
    check(status == 200 and json.loads(text)["choices"][0]["text"].startswith("Hello"), "echo prefixes the prompt")
    # echo with logprobs: the prompt's tokens scored; a generated token scored again as part of
    # the next prompt has the log-probability generation gave it.
    status, text = post(base, "/v1/completions", {"prompt": "The cat sat", "max_tokens": 1, "logprobs": 1, "temperature": 0,
                                                  "return_token_ids": True})
    first = json.loads(text)["choices"][0]
    gen_lp = first["logprobs"]["token_logprobs"][0]
    ids = first["token_ids"]
    status, text = post(base, "/v1/completions", {"prompt": "The cat sat", "max_tokens": 1, "echo": True, "logprobs": 2})
    lp = json.loads(text)["choices"][0]["logprobs"]
    n_prompt = json.loads(text)["usage"]["prompt_tokens"]
    check(status == 200 and lp["token_logprobs"][0] is None and all(x is not None for x in lp["token_logprobs"][1:]) and
          len(lp["tokens"]) == n_prompt + 1 and "".join(lp["tokens"][:n_prompt]) == "The cat sat",
          "echo with logprobs: every prompt token but the first scored")
    status, text = post(base, "/v1/completions", {"prompt": encode(binary, "The cat sat") + ids,
                                                  "max_tokens": 1, "echo": True, "logprobs": 0})
    lp2 = json.loads(text)["choices"][0]["logprobs"]["token_logprobs"]
    check(status == 200 and abs(lp2[len(lp2) - 2] - gen_lp) < 2e-3,
          "a generated token's log-probability = its prompt log-probability in the next request (%.5f vs %.5f)" %
          (gen_lp, lp2[len(lp2) - 2] if status == 200 else float("nan")))


def encode(binary, text):
    """The prompt's token ids as the server encodes a completions prompt (the tokenizer's rules)."""
    p = subprocess.run([binary, "tokenize", "-m", "random:tiny", "--text", text, "--add-special"], capture_output=True, text=True)
    return [int(x) for x in p.stdout.strip().splitlines()[-1].split(",")]


def check_batch(binary):
    """radixlm batch takes the same fields: a forced tool call, a json_schema output, logprobs."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    lines = [
        {"custom_id": "tool", "method": "POST", "url": "/v1/chat/completions", "body": {
            "messages": [{"role": "user", "content": "Weather?"}], "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "search"}},
            "max_tokens": 200, "seed": 3, "chat_template_kwargs": {"enable_thinking": False}}},
        {"custom_id": "json", "method": "POST", "url": "/v1/chat/completions", "body": {
            "messages": [{"role": "user", "content": "JSON"}], "max_tokens": 32, "seed": 1, "logprobs": True, "top_logprobs": 1,
            "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": schema, "strict": True}},
            "chat_template_kwargs": {"enable_thinking": False}}},
        {"custom_id": "bad", "method": "POST", "url": "/v1/chat/completions", "body": {
            "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema",
                                                                                "json_schema": {"name": "o", "schema": {"type": "array", "uniqueItems": True}}}}},
    ]
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "in.jsonl"), os.path.join(d, "out.jsonl")
        with open(src, "w") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
        p = subprocess.run([binary, "batch", "-m", "random:tiny", "-i", src, "-o", out], capture_output=True, text=True)
        got = {}
        if p.returncode == 0:
            for line in open(out):
                j = json.loads(line)
                got[j["custom_id"]] = j["response"]
    tool = got.get("tool", {}).get("body", {}).get("choices", [{}])[0]
    ok = tool.get("finish_reason") in ("tool_calls", "length")
    if tool.get("finish_reason") == "tool_calls":
        ok = all(c["function"]["name"] == "search" for c in tool["message"]["tool_calls"])
    check(ok, "batch: a forced tool call line (%s)" % tool.get("finish_reason"))
    js = got.get("json", {}).get("body", {}).get("choices", [{}])[0]
    ok = js.get("finish_reason") == "length" or (js.get("finish_reason") == "stop" and json.loads(js["message"]["content"])["ok"] in (True, False))
    check(ok and js.get("logprobs") is not None, "batch: a json_schema line with logprobs")
    check(got.get("bad", {}).get("status_code") == 400, "batch: a refused schema is that line's 400")



def im_end_id(binary):
    return encode(binary, "<|im_end|>")[-1]


def conversation(base, end_id, turns):
    """A client's multi-turn chat: each reply appended as received, then a new user message.
    Returns per turn (prompt_tokens, cached_tokens, prompt + completion tokens of the turn)."""
    history = [{"role": "system", "content": "You help with code. " * 12}]
    out = []
    for t in range(turns):
        history.append({"role": "user", "content": "Step %d: what next?" % t})
        # A grammar ends the random model's turn (on its end-of-turn token) after free text.
        status, r = chat(base, {"messages": history, "max_tokens": 60, "seed": t,
                                "grammar": 'root ::= [a-zA-Z ,.]{4,24}'})
        if status != 200:
            check(False, "turn %d answered (%s)" % (t, r))
            return out
        u = r["usage"]
        out.append((u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"], u["prompt_tokens"] + u["completion_tokens"],
                    r["choices"][0]["finish_reason"]))
        m = r["choices"][0]["message"]
        history.append({k: m[k] for k in ("role", "content", "reasoning_content", "tool_calls") if m.get(k) is not None})
    return out


def check_turn_reuse(base, binary):
    """serve/turn_memory.h: a re-sent history holds the tokens the model generated, so each turn's
    cache hit is the whole previous turn (prompt and reply); --no-turn-reuse re-renders."""
    end_id = im_end_id(binary)
    turns = conversation(base, end_id, 4)
    for i in range(1, len(turns)):
        prev_prompt, _, prev_total, prev_finish = turns[i - 1]
        prompt, cached, _, _ = turns[i]
        if prev_finish != "stop":
            continue  # only a turn that ended on its end-of-turn token is remembered
        check(cached >= prev_total - 1,
              "turn %d: the cache hit covers the previous turn's prompt and reply (%d cached, previous %d + reply = %d)" %
              (i + 1, cached, prev_prompt, prev_total))
    check(any(t[3] == "stop" for t in turns[:-1]), "some turn ended on its end-of-turn token (%s)" % [t[3] for t in turns])
    return turns


def check_logit_bias(base, binary):
    """OpenAI's logit_bias: +100 makes a token certain, -100 forbids it; logprobs stay the model's."""
    end = im_end_id(binary)
    status, r = chat(base, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "seed": 2,
                            "logit_bias": {"151644": 100}, "logprobs": True})
    c = r["choices"][0]
    check(status == 200 and c["logprobs"]["content"] and all(t["token"] == "<|im_start|>" for t in c["logprobs"]["content"]) and
          all(t["logprob"] < -1 for t in c["logprobs"]["content"]),
          "logit_bias +100 forces the token; its logprob is still the model's (%s)" % [t["logprob"] for t in c["logprobs"]["content"]][:2])
    status, r = chat(base, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "logit_bias": {"abc": 1}})
    check(status == 400 and r["error"]["param"] == "logit_bias", "logit_bias with a key that is not a token id: 400")
    status, r = chat(base, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "logit_bias": {str(end): 101}})
    check(status == 400 and r["error"]["param"] == "logit_bias", "logit_bias beyond 100: 400")


def check_wrong_types(base):
    """Fields of the wrong type in the agent APIs' bodies are 400s naming them, never a 500
    (fuzz/agent_api_fuzz.cc found an exception here)."""
    bodies = [("/v1/responses", {"model": "m", "input": [{"type": [{"type": "input_text", "text": "x"}]}]}),
              ("/v1/responses", {"model": "m", "input": "hi", "text": {"format": {"type": "json_schema", "strict": "yes",
                                                                                  "schema": {"type": "object"}}}, "max_output_tokens": 2}),
              ("/v1/responses", {"model": "m", "input": "hi", "prompt_cache_key": "k", "prompt_cache_retention": 24}),
              ("/v1/messages", {"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "x"}],
                                "thinking": {"type": 7}, "tool_choice": {"type": "auto", "disable_parallel_tool_use": "no"}}),
              ("/v1/messages", {"model": "m", "max_tokens": 2, "messages": [{"role": [1], "content": "x"}]})]
    for path, body in bodies:
        status, text = post(base, path, body)
        check(status in (200, 400), "%s with a field of the wrong type: %d, not a 500 (%s)" % (path, status, text[:80]))


def recomputed(turns):
    """Tokens of each previous turn (prompt + reply) computed again, over a conversation()."""
    return sum(turns[i - 1][2] - turns[i][1] for i in range(1, len(turns)))


def main():
    binary = sys.argv[1]
    serve = ["-m", "random:tiny", "--kv-tokens", "16384"]
    with serving(binary, serve) as base:
        check_tool_calls(base)
        check_tool_loop_and_sharing(base)
        check_structured(base, binary)
        check_logprobs(base, binary)
        reused = check_turn_reuse(base, binary)
        check_logit_bias(base, binary)
        check_wrong_types(base)
        check_batch(binary)
    # The plain path: every turn re-rendered by the template (whose text re-encodes differently
    # from the tokens a random model generated), so the hit stops inside the first reply.
    with serving(binary, serve + ["--no-turn-reuse"]) as base:
        turns = conversation(base, im_end_id(binary), 4)
        check(recomputed(turns) > recomputed(reused),
              "re-rendering recomputes more of each previous turn than turn reuse (%d vs %d tokens over turns 2-4)" %
              (recomputed(turns), recomputed(reused)))
    return verdict()


if __name__ == "__main__":
    sys.exit(main())
