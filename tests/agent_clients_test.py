#!/usr/bin/env python3
"""The agent CLIs people run, end to end against `radixlm serve` (issue 46): Claude Code (Anthropic
Messages), Codex CLI (Responses), Qwen Code and opencode (chat completions), two turns each (the
second continues the session: `claude -p --continue`, `codex exec resume --last`, `qwen -c`,
`opencode run --continue`). Every client must exit 0 and print the model's text, and the server
must answer every request (radixlm_http_errors_total stays 0).

The clients come from scripts/setup_agent_clients.sh (third_party_data/agent-clients) or the
folder of their .bin in RADIXLM_AGENT_CLIENTS; without them this reports SKIPPED (exit 77). Each
client runs with a throwaway HOME and working folder under a temporary directory, its telemetry
and updates off, and its default, non-bypassing permissions: Claude Code in `dontAsk` mode,
Codex's read-only sandbox with approval "never", Qwen Code's default approval mode, opencode with
bash / edit / webfetch denied. A random model's tool calls never run outside that folder.

The model is random:tiny (Qwen3's tokenizer and template). A random model rarely ends a turn by
itself, and Claude Code and Codex treat a reply cut at max_tokens as an error, so the server adds
+10 to <|im_end|>'s logit (`serve --logit-bias`, llama.cpp's option): turns end after a few to
tens of tokens, on their own end-of-turn token; `--max-output-tokens 256` bounds the rest.

Usage: agent_clients_test.py RADIXLM [MODEL]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_test import check, metric, serving, verdict  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("RADIXLM_AGENT_CLIENTS", os.path.join(ROOT, "third_party_data/agent-clients/node_modules/.bin"))
MODEL_NAME = "random:tiny"  # set from /v1/models in main(): chat completions check the name
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "TERM": "dumb", "LANG": "C.UTF-8"}


def run(argv, home, work, env, timeout):
    e = dict(BASE_ENV, HOME=home, **env)
    p = subprocess.run(argv, cwd=work, env=e, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def printed(rc, stdout, stderr):
    """(ok, what) of a client that prints the model's answer: exit 0 and some text."""
    ok = rc == 0 and stdout.strip() != ""
    return ok, "rc %d, %r %s" % (rc, stdout.strip()[:40], stderr[-300:] if not ok else "")


# One turn of each client against `base` (the server's http://HOST:PORT) in its HOME and working
# folder: the first turn starts a session, a later one continues it. Returns (ok, what happened).
# `env` adds to the client's environment (the bench lengthens timeouts).

def claude_turn(base, home, work, first, prompt, env=None, timeout=300):
    e = {"ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": "sk-local",
         "ANTHROPIC_MODEL": MODEL_NAME, "ANTHROPIC_SMALL_FAST_MODEL": MODEL_NAME,
         "ANTHROPIC_DEFAULT_HAIKU_MODEL": MODEL_NAME, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
         "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
         "CLAUDE_CODE_MAX_RETRIES": "1", **(env or {})}
    argv = [os.path.join(BIN, "claude"), "-p"] + ([] if first else ["--continue"]) + \
        [prompt, "--output-format", "json", "--permission-mode", "dontAsk"]
    rc, stdout, stderr = run(argv, home, work, e, timeout)
    try:
        r = json.loads(stdout)
    except ValueError:
        r = {}
    ok = rc == 0 and r.get("is_error") is False and isinstance(r.get("result"), str)
    return ok, "rc %d, is_error %s, result %r %s" % (rc, r.get("is_error"), str(r.get("result"))[:40], stderr[-200:] if not ok else "")


def codex_turn(base, home, work, first, prompt, env=None, timeout=300):
    if first:  # config.toml: the radixlm provider on the Responses API, read-only, nothing sent out
        with open(os.path.join(home, "config.toml"), "w") as f:
            f.write("""model = "%s"
model_provider = "radixlm"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false
web_search = "disabled"

[model_providers.radixlm]
name = "radixlm"
base_url = "%s/v1"
wire_api = "responses"
env_key = "RADIXLM_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
metrics_exporter = "none"
trace_exporter = "none"

[features]
plugins = false
apps = false
remote_plugin = false
tool_suggest = false
unbounded_connection_retries = false
""" % (MODEL_NAME, base))
    argv = ["exec", "--skip-git-repo-check", prompt] if first else ["exec", "resume", "--last", "--skip-git-repo-check", prompt]
    return printed(*run([os.path.join(BIN, "codex")] + argv, home, work,
                        {"CODEX_HOME": home, "RADIXLM_API_KEY": "sk-local", **(env or {})}, timeout))


def qwen_turn(base, home, work, first, prompt, env=None, timeout=300):
    if first:
        os.makedirs(os.path.join(home, ".qwen"), exist_ok=True)
        with open(os.path.join(home, ".qwen", "settings.json"), "w") as f:
            json.dump({"security": {"auth": {"selectedType": "openai"}}, "model": {"name": MODEL_NAME},
                       "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
                       "memory": {"enableManagedAutoMemory": False},
                       "general": {"disableAutoUpdate": True, "disableUpdateNag": True}}, f)
    e = {"OPENAI_BASE_URL": base + "/v1", "OPENAI_API_KEY": "sk-local", "OPENAI_MODEL": MODEL_NAME,
         "QWEN_CODE_DISABLE_PRECONNECT": "1", **(env or {})}
    argv = [os.path.join(BIN, "qwen"), "--approval-mode", "default"] + ([prompt] if first else ["-c", prompt])
    return printed(*run(argv, home, work, e, timeout))


def opencode_turn(base, home, work, first, prompt, env=None, timeout=300):
    conf = os.path.join(home, ".config", "opencode")
    tmp = os.path.join(home, "tmp")
    if first:
        os.makedirs(os.path.join(conf, "node_modules"), exist_ok=True)  # no plugin install at start (offline)
        os.makedirs(tmp, exist_ok=True)
        with open(os.path.join(conf, "package.json"), "w") as f:
            json.dump({"dependencies": {}}, f)
        with open(os.path.join(conf, "opencode.json"), "w") as f:
            json.dump({"$schema": "https://opencode.ai/config.json",
                       "provider": {"radixlm": {"npm": "@ai-sdk/openai-compatible", "name": "radixlm",
                                                "options": {"baseURL": base + "/v1", "apiKey": "sk-local"},
                                                "models": {MODEL_NAME: {"name": MODEL_NAME, "limit": {"context": 32768, "output": 4096}}}}},
                       "model": "radixlm/" + MODEL_NAME, "small_model": "radixlm/" + MODEL_NAME, "autoupdate": False,
                       "share": "disabled",
                       "permission": {"bash": "deny", "edit": "deny", "webfetch": "deny", "external_directory": "deny"}}, f)
    e = {"TMPDIR": tmp, "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
         "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}
    rg = shutil.which("rg") or next((os.path.join(dp, "rg") for dp, _, fs in os.walk(os.path.join(BIN, "..", "@openai"))
                                     if "rg" in fs), None)
    if rg:
        e["PATH"] = os.path.dirname(rg) + ":" + BASE_ENV["PATH"]
    argv = [os.path.join(BIN, "opencode"), "run"] + ([] if first else ["--continue"]) + [prompt]
    return printed(*run(argv, home, work, {**e, **(env or {})}, timeout))


TURNS = {"claude": claude_turn, "codex": codex_turn, "qwen": qwen_turn, "opencode": opencode_turn}


def errors_metric(base):
    return metric(urllib.request.urlopen(base + "/metrics", timeout=10).read().decode(), "radixlm_http_errors_total")


def main():
    binary = sys.argv[1]
    model = sys.argv[2] if len(sys.argv) > 2 else "random:tiny"
    clients = [n for n in TURNS if os.access(os.path.join(BIN, n), os.X_OK)]
    if not clients:
        print("SKIPPED: no agent client in %s (scripts/setup_agent_clients.sh installs them)" % BIN)
        return 77
    for n in TURNS:
        if n not in clients:
            print("skip %s: not installed" % n)
    ids = subprocess.run([binary, "tokenize", "-m", model, "--text", "<|im_end|>", "--add-special"], capture_output=True,
                         text=True, check=True).stdout.strip().splitlines()[-1].split(",")
    with serving(binary, ["-m", model, "--max-output-tokens", "256", "--logit-bias", ids[-1] + "+10"]) as base:
        global MODEL_NAME
        MODEL_NAME = json.loads(urllib.request.urlopen(base + "/v1/models", timeout=10).read())["data"][0]["id"]
        with tempfile.TemporaryDirectory(prefix="radixlm-agents-") as scratch:
            for name in clients:
                home, work = os.path.join(scratch, name, "home"), os.path.join(scratch, name, "work")
                os.makedirs(home)
                os.makedirs(work)
                before = errors_metric(base)
                for turn, prompt in enumerate(("Say hello, then list this folder.", "And again."), 1):
                    ok, what = TURNS[name](base, home, work, turn == 1, prompt)
                    check(ok, "%s turn %d: %s" % (name, turn, what))
                errors = errors_metric(base) - before
                check(errors == 0, "%s: every request answered (%d errors)" % (name, errors))
    return verdict()


if __name__ == "__main__":
    sys.exit(main())
