#!/usr/bin/env python3
"""Grammar soundness checked outside radixlm: for a deterministic sample of JSONSchemaBench
schemas (every 8th of each category), `radixlm grammar --schema-lines --samples 2` walks the
compiled grammar over the Qwen3 vocabulary (a random allowed token each step, fixed seed),
and Debian's python3-jsonschema (with its format checker) must accept every document: the
completed ones as they are, the ones cut at --max-tokens after the grammar's shortest completion
(so a cut document is checked to be a prefix of a valid one).

  grammar_samples_test.py RADIXLM

Exit 77 (SKIPPED) without RADIXLM_SHARED_DATA's jsonschema data or python3-jsonschema.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("SKIPPED: python3-jsonschema not installed")
    sys.exit(77)

EVERY = 8
CATEGORIES = ["Glaiveai2K", "Github_easy", "Kubernetes"]


def main():
    radixlm = sys.argv[1]
    shared = os.environ.get("RADIXLM_SHARED_DATA", "")
    data = os.path.join(shared, "jsonschema")
    if not shared or not os.path.exists(os.path.join(data, "Glaiveai2K.jsonl")):
        print("SKIPPED: no shared jsonschema data")
        sys.exit(77)
    schemas, names = [], []
    for cat in CATEGORIES:
        with open(os.path.join(data, cat + ".jsonl")) as f:
            for i, line in enumerate(f):
                if i % EVERY == 0:
                    row = json.loads(line)
                    schemas.append(row["schema"])
                    names.append(cat + "/" + row["id"])
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for s in schemas:
            f.write(json.dumps(s) + "\n")
        path = f.name
    try:
        out = subprocess.run([radixlm, "grammar", "--schema-lines", path, "--samples", "2", "--max-tokens", "96",
                              "--seed", "7"], capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(path)
    if out.returncode != 0:
        print("FAIL radixlm grammar exited", out.returncode, out.stderr[-2000:])
        return 1
    failures = checked = completed = refused = 0
    for line in out.stdout.splitlines():
        row = json.loads(line)
        i = row["index"]
        if "error" in row:
            refused += 1
            continue
        schema = schemas[i]
        checked += 1
        completed += row["completed"]
        try:
            doc = json.loads(row["document"])
        except ValueError as e:
            failures += 1
            print("FAIL %s: not JSON (%s): %r" % (names[i], e, row["document"][:300]))
            continue
        cls = jsonschema.validators.validator_for(schema)
        errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(doc))
        if errors:
            failures += 1
            print("FAIL %s: %s\n     document: %r" % (names[i], errors[0].message[:300], row["document"][:300]))
    print("schemas %d (refused %d), documents checked %d (completed %d, cut and completed %d), failures %d"
          % (len(schemas), refused, checked, completed, checked - completed, failures))
    if checked < 400:
        print("FAIL too few documents checked")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
