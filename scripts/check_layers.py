#!/usr/bin/env python3
"""Checks that no #include crosses a forbidden module edge (STYLE.md's layering): a module may
include only modules on lower layers (and itself, and the ones listed as allowed peers)."""
import os
import re
import sys

LAYER = {"core": 0, "kernels": 1, "formats": 1, "cache": 1, "models": 2, "scheduler": 2, "tokenizer": 2,
         "engine": 3, "runner": 4, "sim": 4, "serve": 5, "cli": 6}
# Edges STYLE.md forbids although the layers would allow them.
FORBIDDEN = {("models", "cache"), ("cache", "kernels"), ("cache", "formats"), ("scheduler", "models"),
             ("scheduler", "kernels"), ("serve", "runner"), ("serve", "models"), ("serve", "kernels")}


def main(src):
    bad = []
    for module in sorted(os.listdir(src)):
        for root, _, files in os.walk(os.path.join(src, module)):
            for f in files:
                if not f.endswith((".h", ".cc")) or f.endswith("_test.cc"):
                    continue
                path = os.path.join(root, f)
                for n, line in enumerate(open(path), 1):
                    m = re.match(r'#include "(\w+)/', line)
                    if not m or m.group(1) == module:
                        continue
                    dep = m.group(1)
                    if dep not in LAYER or module not in LAYER:
                        bad.append("%s:%d: unknown module in %s" % (path, n, line.strip()))
                    elif LAYER[dep] >= LAYER[module] or (module, dep) in FORBIDDEN:
                        bad.append("%s:%d: %s may not include %s" % (path, n, module, dep))
    for b in bad:
        print(b)
    print("1 passed, 0 failed" if not bad else "0 passed, 1 failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
