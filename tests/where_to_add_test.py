#!/usr/bin/env python3
"""docs/architecture.md's "Where to add X" table names files and tables that exist: every
`src/...` path in it is a file (NAME stands for any name: some file matches), and every
"`SYMBOL` in `PATH`" names a symbol PATH defines or uses.

  where_to_add_test.py SOURCE_DIR
"""
import glob
import os
import re
import sys


def table_rows(text):
    body = text.split("## Where to add X", 1)[1]
    rows = [l for l in body.splitlines() if l.startswith("|")][2:]  # past the header and separator
    if not rows:
        raise SystemExit("FAIL: no rows under 'Where to add X'")
    return rows


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    rows = table_rows(open(os.path.join(src, "docs", "architecture.md"), encoding="utf-8").read())
    failures = checks = 0
    for row in rows:
        for path in re.findall(r"`(src/[^`]+)`", row):
            checks += 1
            if not glob.glob(os.path.join(src, path.replace("NAME", "*"))):
                print("FAIL %s: no file %s" % (row.split("|")[1].strip(), path))
                failures += 1
        for symbol, path in re.findall(r"`(\w+)` in `(src/[^`]+)`", row):
            checks += 1
            if not re.search(r"\b%s\b" % re.escape(symbol), open(os.path.join(src, path), encoding="utf-8").read()):
                print("FAIL %s: %s does not name %s" % (row.split("|")[1].strip(), path, symbol))
                failures += 1
    print("%d rows, %d checks, %d failed" % (len(rows), checks, failures))
    sys.exit(1 if failures or checks < 2 * len(rows) else 0)


if __name__ == "__main__":
    main()
