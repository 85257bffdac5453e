"""Sliding-window architectures against llama.cpp: radixlm's logits on GGUFs written by llama.cpp's
gguf-py (tests/data/swa, make_fixtures.py there) against llama.cpp's logits of the same files and
ids. Per file, over the positions past twice the window (64 of the 96 ids): top-1 equal on at least
63 of 64, and mean |radixlm - llama.cpp| at most 1e-3 of llama.cpp's logit range; with an f32 and
an f16 KV cache (llama.cpp's default is f16).
Usage: swa_llamacpp_test.py RADIXLM"""
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "swa")
FIXTURES = ["gemma3-tiny"]


def main():
    binary = sys.argv[1]
    ids = open(os.path.join(HERE, "ids.txt")).read().strip()
    n = len(ids.split(","))
    ok = True
    for stem in FIXTURES:
        want = np.fromfile(os.path.join(HERE, stem + ".llamacpp-logits.f32"), dtype=np.float32).reshape(n, -1)
        span = float(want.max() - want.min())
        for kv in ("f32", "f16"):
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "l.f32")
                subprocess.run([binary, "logits", "-m", os.path.join(HERE, stem + ".gguf"), "--dtype", "f32",
                                "--kv-dtype", kv, "--threads", "2", "--ids", ids, "--out", out],
                               check=True, capture_output=True)
                got = np.fromfile(out, dtype=np.float32).reshape(n, -1)
            past = slice(n - 64, n)
            top1 = int((got[past].argmax(1) == want[past].argmax(1)).sum())
            mean = float(np.abs(got[past] - want[past]).mean()) / span
            good = top1 >= 63 and mean <= 1e-3
            ok &= good
            print("%s %s kv %s: top-1 %d/64 past the window, mean |diff| %.2e of the logit range (<= 1e-3)"
                  % ("PASS" if good else "FAIL", stem, kv, top1, mean))
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
