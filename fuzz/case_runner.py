"""The differential fuzzers' way into radixlm: a batch of cases as JSONL through one of its batch
commands (`radixlm grammar --check-cases FILE`, `radixlm template cases --input FILE`), one JSON
result line per case back. Shared by fuzz/schema_diff.py and fuzz/template_diff.py.

A run that exits non-zero, answers fewer lines than cases or writes a line that is not JSON is a
"crash"; one past its time (case_timeout + per_case_seconds per case) a "hang". Either way the
results of the cases before it are returned, so the caller can bisect the culprit out.
"""
import json
import os
import shutil
import subprocess


class CaseRunner:
    def __init__(self, binary, command, case_timeout, per_case_seconds, workdir):
        # A private copy: the build may relink the binary during a long run.
        self.binary = os.path.join(workdir, "radixlm")
        shutil.copy2(binary, self.binary)
        self.command, self.case_timeout, self.per_case_seconds = command, case_timeout, per_case_seconds
        self.workdir, self.calls = workdir, 0

    def run_lines(self, lines):
        """lines: one JSON object per case. Returns (the result objects of the cases done,
        None | "crash" | "hang", detail)."""
        path = os.path.join(self.workdir, "cases.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for x in lines:
                f.write(json.dumps(x, ensure_ascii=False, allow_nan=False) + "\n")
        self.calls += 1
        timeout = self.case_timeout + self.per_case_seconds * len(lines)
        try:
            p = subprocess.run([self.binary] + self.command + [path], capture_output=True, timeout=timeout)
            out, status, detail = p.stdout, None, p.stderr.decode("utf-8", "replace")[-400:]
            if p.returncode != 0:
                status, detail = "crash", "exit %d: %s" % (p.returncode, detail)
        except subprocess.TimeoutExpired as e:
            out, status, detail = e.stdout or b"", "hang", "over %.0f s" % timeout
        results = []
        for line in out.decode("utf-8", "replace").split("\n")[:-1]:  # not splitlines: U+2028 is text
            try:
                results.append(json.loads(line))
            except ValueError:
                return results, "crash", "unreadable output line: " + line[:200]
        if status is None and len(results) != len(lines):
            status, detail = "crash", "%d results for %d cases" % (len(results), len(lines))
        return results[:len(lines)], status, detail
