#!/usr/bin/env python3
"""radixlm's and llama.cpp's logits on the same GGUF and the same text (a file other tools open
runs the same model in both): relative difference, top-1 agreement, and each engine's perplexity
over the window. Needs llama.cpp's logits tool (bench/llamacpp_logits.cc, built by
bench/vs_llamacpp.sh); a measurement, not a test.

Usage: logits_vs_llamacpp.py RADIXLM LLAMACPP_LOGITS MODEL.gguf TEXT_FILE [N_TOKENS]"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def main():
    radixlm, llamacpp, model, text_file = sys.argv[1:5]
    n = int(sys.argv[5]) if len(sys.argv) > 5 else 128
    text = open(text_file).read()
    out = subprocess.run([radixlm, "tokenize", "--model", model, "--text", text, "--json"], capture_output=True,
                         text=True, check=True).stdout
    ids = json.loads(out)["ids"][:n]
    csv = ",".join(map(str, ids))
    with tempfile.TemporaryDirectory() as d:
        ours, theirs = os.path.join(d, "r.f32"), os.path.join(d, "l.f32")
        subprocess.run([radixlm, "logits", "--model", model, "--ids", csv, "--out", ours], check=True)
        subprocess.run([llamacpp, model, csv, theirs, "2"], check=True, capture_output=True)
        a = np.fromfile(ours, dtype=np.float32).reshape(len(ids), -1).astype(np.float64)
        b = np.fromfile(theirs, dtype=np.float32).reshape(len(ids), -1).astype(np.float64)

    def ppl(logits):
        z = logits[:-1] - logits[:-1].max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return float(np.exp(-logp[np.arange(len(ids) - 1), ids[1:]].mean()))

    rel = np.abs(a - b).max() / np.abs(b).max()
    top1 = float((a.argmax(1) == b.argmax(1)).mean())
    print(json.dumps({"model": os.path.basename(model), "tokens": len(ids), "max_abs_diff_over_max_logit": rel,
                      "top1_agreement": top1, "perplexity_radixlm": ppl(a), "perplexity_llamacpp": ppl(b)}))


if __name__ == "__main__":
    main()
