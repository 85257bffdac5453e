#!/usr/bin/env python3
"""radixlm's list of the filter and test names jinja2 knows, against Debian's python3-jinja2.

jinja2 refuses an unknown filter or test name when it compiles a template (outside an `if`), and
radixlm answers the same way from its own list (jinja/builtins.cc: Jinja2HasFilter /
Jinja2HasTest: the names it implements plus those it knows jinja2 has). This test renders, for
every name of jinja2.Environment().filters and .tests (plus transformers' `tojson`) and for
names jinja2 does not have, a template that uses the name in a loop that never runs: jinja2 and
radixlm must agree on compiled (text "ok") or refused (TemplateAssertionError), name by name.

Usage: jinja_names_test.py RADIXLM_BINARY. Exit 0 when every name agrees; SKIPPED without jinja2.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import jinja2
    import jinja2.sandbox
except ImportError:
    print("SKIPPED: python3-jinja2 is not installed")
    sys.exit(77)

# Names jinja2 3.1 does not have: other engines' filters and tests, Python's builtins, typos.
NOT_JINJA2 = ["regex_replace", "to_json", "b64encode", "json", "strip", "split", "len", "str", "dictsort2", "uniq",
              "to_nice_json", "quote", "basename", "bool", "ternary", "zip", "flatten", "combine", "date", "raise",
              "escapejs", "safe_join", "reverse_", "Upper", "lenght", "contains", "match", "search", "regex",
              "empty", "none_", "truthy", "falsy", "iterable_", "in_", "startswith"]


def cases(env):
    filters = sorted(set(env.filters) | set(NOT_JINJA2))
    tests = sorted(set(env.tests) | set(NOT_JINJA2))
    for name in filters:
        yield "filter", name, "{%% for x in [] %%}{{ x | %s }}{%% endfor %%}ok" % name
    for name in tests:
        yield "test", name, "{%% for x in [] %%}{{ x is %s }}{%% endfor %%}ok" % name


def reference(env, source):
    try:
        return {"text": env.from_string(source).render()}
    except jinja2.TemplateError as e:
        return {"error": type(e).__name__}


def main():
    binary = sys.argv[1]
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, **kw: json.dumps(x)  # transformers adds it (chat_templates README)
    rows = list(cases(env))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "cases.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for _, _, source in rows:
                f.write(json.dumps({"template": source}) + "\n")
        p = subprocess.run([binary, "template", "cases", "--input", path], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        print("FAIL: radixlm template cases exited %d: %s" % (p.returncode, p.stderr[-500:]))
        return 1
    ours = [json.loads(line) for line in p.stdout.splitlines()]
    if len(ours) != len(rows):
        print("FAIL: %d answers for %d cases" % (len(ours), len(rows)))
        return 1
    bad = 0
    known = {"filter": 0, "test": 0}
    for (kind, name, source), got in zip(rows, ours):
        want = reference(env, source)
        if "text" in want:
            known[kind] += 1
        mine = {"text": got["text"]} if "text" in got else {"error": got.get("error")}
        if mine != want:
            bad += 1
            print("FAIL %s %r: jinja2 %s, radixlm %s" % (kind, name, want, got))
    print("%d filter and %d test names jinja2 knows, %d it does not; %d disagreements" %
          (known["filter"], known["test"], len(NOT_JINJA2), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
