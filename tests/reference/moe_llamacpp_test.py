"""Mixture-of-experts GGUFs against llama.cpp: each MoE preset exported as f32 GGUF (the same
file make_fixtures.py gave llama.cpp), radixlm's logits of the same 64 ids against llama.cpp's
kept in tests/data/moe (its top-1 id per position, its largest |logit| and its logits at 256
sampled columns). Tolerances: top-1 equal at >= 63 of 64 positions; at the sampled columns
max |radixlm - llama.cpp| <= 5e-4 x the position's largest |logit| (f32 weights both sides;
llama.cpp keeps KV in f16, radixlm here f32).
Usage: moe_llamacpp_test.py RADIXLM"""
import os
import subprocess
import sys
import tempfile

import numpy as np

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "moe")
PRESETS = ["qwen3moe-tiny", "qwen35moe-tiny", "granite-h-moe-tiny", "nemotron-h-moe-tiny"]


def main():
    radixlm = sys.argv[1]
    ok = True
    for preset in PRESETS:
        ref = np.load(os.path.join(DATA, preset + ".llamacpp.npz"))
        with tempfile.TemporaryDirectory() as tmp:
            gguf, out = os.path.join(tmp, "m.gguf"), os.path.join(tmp, "r.f32")
            subprocess.run([radixlm, "export", "-m", "random:" + preset, "--dtype", "f32", "-o", gguf], check=True,
                           capture_output=True)
            subprocess.run([radixlm, "logits", "-m", gguf, "--ids", ",".join(map(str, ref["ids"])), "--out", out,
                            "--kv-dtype", "f32", "--threads", "2"], check=True, capture_output=True)
            got = np.fromfile(out, dtype=np.float32).reshape(len(ref["ids"]), -1)
        top1 = int((got.argmax(1) == ref["top1"]).sum())
        err = float((np.abs(got[:, ref["columns"]] - ref["sampled"]).max(1) / ref["max_abs"]).max())
        passed = top1 >= 63 and err <= 5e-4
        ok &= passed
        print("%s %s: top-1 %d/64 with llama.cpp, max error %.2e of the largest logit (tolerance 5e-4)" %
              ("PASS" if passed else "FAIL", preset, top1, err))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
