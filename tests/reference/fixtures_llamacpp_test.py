"""Architectures against llama.cpp: radixlm's logits on GGUFs written by llama.cpp's gguf-py
(tests/data/<set>, make_fixtures.py there) against llama.cpp's logits of the same files and ids.
Per file, over the last 64 of the 96 ids (past twice the sliding window of the swa set), with an
f32 and an f16 KV cache (llama.cpp's default is f16):
  - f32 weights: top-1 equal on at least 63 of 64, mean |radixlm - llama.cpp| at most 1e-3 of
    llama.cpp's logit range;
  - swa: gpt-oss with MXFP4 experts and Q8_0 elsewhere (llama-quantize MXFP4_MOE): llama.cpp
    rounds every activation to Q8_0 before those dot products (radixlm keeps them f32; its own
    exact path is checked against PyTorch by golden_swa_gpt_oss_tiny_mxfp4_gguf), so the bound
    is looser: top-1 on at least 54 of 64 and mean at most 1e-2 of the range. For scale,
    llama.cpp's own MXFP4 logits differ from its f32 ones by 2.4e-2 of the range with top-1 on
    36 of 64;
  - lfm2: BF16 weights (llama-quantize BF16): top-1 on at least 58 of 64 (0.9), mean at most
    1e-2 of the range (radixlm may run bf16 activations where the CPU has bf16 dot products).
Usage: fixtures_llamacpp_test.py RADIXLM swa|lfm2"""
import os
import subprocess
import sys
import tempfile

import numpy as np

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
# per set, file stem: (least top-1 matches of 64, largest mean |diff| / logit range)
SETS = {
    "swa": {"gemma3-tiny": (63, 1e-3), "gemma4-tiny": (63, 1e-3), "gemma4-moe-tiny": (63, 1e-3),
            "gpt-oss-tiny": (63, 1e-3), "gpt-oss-tiny-mxfp4": (54, 1e-2)},
    "lfm2": {"lfm2-tiny": (63, 1e-3), "lfm2moe-tiny": (63, 1e-3), "lfm2-tiny-bf16": (58, 1e-2)},
}


def main():
    binary, fixture_set = sys.argv[1], sys.argv[2]
    HERE = os.path.join(DATA, fixture_set)
    ids = open(os.path.join(HERE, "ids.txt")).read().strip()
    n = len(ids.split(","))
    ok = True
    for stem, (min_top1, max_mean) in SETS[fixture_set].items():
        want = np.fromfile(os.path.join(HERE, stem + ".llamacpp-logits.f32"), dtype=np.float32).reshape(n, -1)
        span = float(want.max() - want.min())
        for kv in ("f32", "f16"):
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "l.f32")
                # A BF16 file runs as loaded (bf16 weights); the others with f32 weights.
                dtype = [] if stem.endswith("-bf16") else ["--dtype", "f32"]
                subprocess.run([binary, "logits", "-m", os.path.join(HERE, stem + ".gguf")] + dtype +
                               ["--kv-dtype", kv, "--threads", "2", "--ids", ids, "--out", out],
                               check=True, capture_output=True)
                got = np.fromfile(out, dtype=np.float32).reshape(n, -1)
            past = slice(n - 64, n)
            top1 = int((got[past].argmax(1) == want[past].argmax(1)).sum())
            mean = float(np.abs(got[past] - want[past]).mean()) / span
            good = top1 >= min_top1 and mean <= max_mean
            ok &= good
            print("%s %s kv %s: top-1 %d/64 on the last 64 (>= %d), mean |diff| %.2e of the logit range (<= %.0e)"
                  % ("PASS" if good else "FAIL", stem, kv, top1, min_top1, mean, max_mean))
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
