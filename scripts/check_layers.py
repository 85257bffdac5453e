#!/usr/bin/env python3
"""Checks that no module of src/ depends on a module its row of the allowed-dependencies table
in docs/architecture.md does not list (STYLE.md's layering). Usage:

    check_layers.py SRC_DIR ARCHITECTURE_MD

A dependency is an #include of "<module>/..." or <module/...> (any spacing, indented or not)
in a module's non-test sources, or a radixlm_<module> library on the module's own
target_link_libraries line in its CMakeLists.txt. Includes of non-modules (<vector>,
<nlohmann/json.hpp>) are ignored; an unknown module directory is an error.
Exits 1 and prints every violation, else 0.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([A-Za-z_][A-Za-z0-9_]*)/')
LINK = re.compile(r'target_link_libraries\s*\(\s*radixlm_([A-Za-z0-9_]+)\b([^)]*)\)', re.S)


def read_table(path):
    """{module: set of allowed dependencies} from the '| module | layer | may depend on |' table."""
    allowed, in_table = {}, False
    for line in open(path, encoding="utf-8"):
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] == "module" and cells[2].startswith("may depend on"):
            in_table = True
            continue
        if not in_table:
            continue
        if not line.strip().startswith("|"):
            break
        if set(cells[0]) <= set("-: "):
            continue  # the separator row
        deps = cells[2]
        allowed[cells[0]] = {"*"} if deps == "everything" else {d.strip().strip("`") for d in deps.split(",") if d.strip() not in ("", "-", "—")}
    if not allowed:
        raise SystemExit("%s: no allowed-dependencies table found" % path)
    return allowed


def check(src, allowed):
    bad = []

    def edge(module, dep, where):
        if dep == module:
            return
        if dep not in allowed:
            return  # not a module of ours: a library
        if "*" not in allowed[module] and dep not in allowed[module]:
            bad.append("%s: %s may not depend on %s" % (where, module, dep))

    for module in sorted(os.listdir(src)):
        mdir = os.path.join(src, module)
        if not os.path.isdir(mdir):
            continue
        if module not in allowed:
            bad.append("%s: module '%s' is not in the allowed-dependencies table" % (mdir, module))
            continue
        for root, _, files in os.walk(mdir):
            for f in sorted(files):
                path = os.path.join(root, f)
                if f.endswith((".h", ".cc")) and not f.endswith(("_test.cc", "_test.h")):
                    for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                        m = INCLUDE.match(line)
                        if m:
                            edge(module, m.group(1), "%s:%d" % (path, n))
                elif f == "CMakeLists.txt":
                    text = open(path, encoding="utf-8").read()
                    for m in LINK.finditer(text):
                        if m.group(1) != module:
                            continue  # test executables link what their tests need
                        line = text[:m.start()].count("\n") + 1
                        for dep in re.findall(r"radixlm_([A-Za-z0-9_]+)", m.group(2)):
                            edge(module, dep, "%s:%d" % (path, line))
    return bad


def main():
    src, table = sys.argv[1], sys.argv[2]
    bad = check(src, read_table(table))
    for b in bad:
        print(b)
    print("layering: %d violation(s)" % len(bad) if bad else "layering: ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
