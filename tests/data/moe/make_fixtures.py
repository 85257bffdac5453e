#!/usr/bin/env python3
"""Makes the llama.cpp side of tests/reference/moe_llamacpp_test.py: for each mixture-of-experts
preset, `radixlm export` writes its f32 GGUF (deterministic: the weights depend only on the
preset's name), llama.cpp (bench/vs_llamacpp.sh --build-only: node-llama-cpp@3.22.1's v0.5.0,
with bench/llamacpp_logits.cc) computes the logits of 64 seeded random ids, and this keeps, per
position, llama.cpp's top-1 id, its largest |logit| and its logits at 256 seeded vocabulary
columns (the whole [64, 151936] would be 39 MB per model). Nothing here is computed by radixlm.

Usage: make_fixtures.py RADIXLM LLAMACPP_LOGITS"""
import os
import subprocess
import sys
import tempfile

import numpy as np

PRESETS = ["qwen3moe-tiny", "qwen35moe-tiny", "granite-h-moe-tiny", "nemotron-h-moe-tiny"]
HERE = os.path.dirname(os.path.abspath(__file__))


def ids_and_columns(vocab):
    rng = np.random.default_rng(27)
    return rng.integers(0, 150000, 64), np.sort(rng.choice(vocab, 256, replace=False))


def main():
    radixlm, llama = sys.argv[1:3]
    for preset in PRESETS:
        with tempfile.TemporaryDirectory() as tmp:
            gguf, out = os.path.join(tmp, "m.gguf"), os.path.join(tmp, "l.f32")
            subprocess.run([radixlm, "export", "-m", "random:" + preset, "--dtype", "f32", "-o", gguf], check=True)
            ids, cols = ids_and_columns(151936)
            subprocess.run([llama, gguf, ",".join(map(str, ids)), out, "2"], check=True, capture_output=True)
            logits = np.fromfile(out, dtype=np.float32).reshape(len(ids), -1)
        np.savez_compressed(os.path.join(HERE, preset + ".llamacpp.npz"), ids=ids, columns=cols,
                            top1=logits.argmax(1), max_abs=np.abs(logits).max(1), sampled=logits[:, cols])
        print(preset, "written")


if __name__ == "__main__":
    main()
