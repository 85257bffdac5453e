"""Quantised GGUF files written by llama.cpp's quantizer (tests/data/quant, see its README):
radixlm's logits on them against llama.cpp's logits for the same file and ids, against
radixlm's exact run of the same file (dequantised weights, f32 activations and KV), and
against the unquantised model (llama.cpp's logits of the f32 file the fixtures came from).
Usage: quant_gguf_test.py RADIXLM_BINARY

Tolerances (errors are max |a - b| / max |b|, b the second):
  - vs llama.cpp on the same file: <= 3%, top-1 equal at every decisive position (exact top-1
    margin > 5% of the largest logit) and at >= 90% of all positions (int8 activations in both
    engines differ by ~1%, so near-ties may flip);
  - vs radixlm's exact run: <= 2% (int8 activations per 32 elements, bf16 KV); 3% for a
    mixture of experts, whose router is fed int8 activations too;
  - a mixture of experts (moe-*): the llama.cpp checks skip the positions where llama.cpp's
    router picked another expert than the exact computation (see main), at most 10% of them;
  - vs the unquantised model: at most 1.25x llama.cpp's own error on the same file (the
    format's error: ~1.4% Q8_0 ... ~40% Q2_K on this model).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "quant")
# file stem: the unquantised base it came from. moe-mxfp4: a Qwen3-MoE file whose experts
# llama-quantize wrote as MXFP4 (MXFP4_MOE; the rest Q8_0).
TYPES = {"q8_0": "f32", "q4_0": "f32", "q4_k_m": "f32", "q5_k_m": "f32", "q2_k": "f32", "moe-mxfp4": "moe-f32"}


def logits(binary, path, ids, *extra):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "l.f32")
        subprocess.run([binary, "logits", "--model", path, "--ids", ids, "--out", out, "--threads", "2", *extra],
                       check=True, capture_output=True)
        return np.fromfile(out, np.float32).reshape(len(ids.split(",")), -1)


def main():
    binary = sys.argv[1]
    ids = open(os.path.join(DATA, "ids.txt")).read().strip()
    n = len(ids.split(","))
    err = lambda a, b: float(np.abs(a - b).max() / np.abs(b).max())
    agree = lambda a, b, rows: float((a.argmax(1) == b.argmax(1))[rows].mean())
    ok = True
    for t, base_name in TYPES.items():
        base = np.fromfile(os.path.join(DATA, f"tiny-{base_name}.llamacpp-logits.f32"), np.float32).reshape(n, -1)
        path = os.path.join(DATA, f"tiny-{t}.gguf")
        llama = np.fromfile(os.path.join(DATA, f"tiny-{t}.llamacpp-logits.f32"), np.float32).reshape(n, -1)
        got = logits(binary, path, ids)
        exact = logits(binary, path, ids, "--dtype", "f32", "--kv-dtype", "f32")
        top2 = np.sort(exact, 1)[:, -2:]
        decisive = (top2[:, 1] - top2[:, 0]) > 0.05 * np.abs(exact).max()
        # A mixture of experts is discontinuous: where the router's top-k is a near-tie, llama.cpp's
        # int8 activations can pick another expert than the exact computation, and the positions
        # after it read that position's K/V. Such positions are the ones where radixlm's exact run
        # (checked against PyTorch by the golden tests) itself differs from llama.cpp by more than
        # the 3% a quantised run may; the error check skips them, and they may be 10% at most.
        rows = np.ones(n, bool)
        if t.startswith("moe-"):
            rows = np.abs(exact - llama).max(1) / np.abs(llama).max() <= 0.03
        checks = {
            "err vs llama.cpp <= 3%": err(got[rows], llama[rows]) <= 0.03,
            "router near-ties <= 10% of positions": rows.mean() >= 0.9,
            "top-1 vs llama.cpp at decisive positions": agree(got, llama, decisive) == 1.0,
            "top-1 vs llama.cpp >= 90%": agree(got, llama, slice(None)) >= 0.9,
            # experts: two experts' outputs weighted by a router fed int8 activations
            "err vs exact <= %d%%" % (3 if t.startswith("moe-") else 2): err(got, exact) <= (0.03 if t.startswith("moe-") else 0.02),
            "err vs unquantised <= 1.25x llama.cpp's": err(got, base) <= 1.25 * err(llama, base),
        }
        passed = all(checks.values())
        ok &= passed
        print("%s %s: vs llama.cpp err %.4f (%d positions, %d router near-ties skipped) top-1 %.3f (decisive %d/%d: %.3f); "
              "vs exact err %.4f; vs unquantised err %.4f (llama.cpp %.4f)%s" % (
                  "PASS" if passed else "FAIL", t, err(got[rows], llama[rows]), rows.sum(), n - rows.sum(),
                  agree(got, llama, slice(None)),
                                       decisive.sum(), n, agree(got, llama, decisive), err(got, exact), err(got, base),
                                       err(llama, base), "" if passed else " failed: " + ", ".join(k for k, v in checks.items() if not v)))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
