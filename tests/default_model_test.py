#!/usr/bin/env python3
"""The shipped default models (models/kjv-*.gguf, made by train/train_kjv.py) load, stay small,
keep their held-out perplexity on Revelation (tests/data/kjv-revelation.txt, never trained on)
under the bound their model card states, and write English.

The bound is radixlm's own measurement of the shipped file plus 1% (Q8_0 weights meet int8
activations, bitwise alike on every ISA, so the figure is reproducible; the slack allows a
future change in summation order). The Qwen3 shape after a few training steps scores ~51,000.

Usage: default_model_test.py RADIXLM SOURCE_DIR"""
import json
import os
import subprocess
import sys

MODELS = ("kjv-qwen3", "kjv-qwen35")
MAX_TOTAL_BYTES = 20_000_000
COMMON = {"the", "and", "of", "unto", "that", "he", "his", "shall", "lord", "god", "in", "to", "they", "for", "i"}


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def main():
    radixlm, root = sys.argv[1], sys.argv[2]
    held = os.path.join(root, "tests", "data", "kjv-revelation.txt")
    ok, total = True, 0
    for name in MODELS:
        gguf, card_path = os.path.join(root, "models", name + ".gguf"), os.path.join(root, "models", name + ".json")
        if not os.path.exists(gguf) or not os.path.exists(card_path):
            print("FAIL %s: %s or its model card is missing" % (name, gguf))
            ok = False
            continue
        total += os.path.getsize(gguf)
        card = json.load(open(card_path))
        got = json.loads(run([radixlm, "perplexity", gguf, "--file", held, "--ctx", str(card["ctx"]), "--json"]))
        ppl, bound = got["perplexity"], card["perplexity_bound"]
        status = "ok" if ppl <= bound else "FAIL"
        ok &= ppl <= bound
        print("%s %s: held-out perplexity %.3f over %d tokens (bound %.2f; card: %.3f)"
              % (status, name, ppl, got["tokens_scored"], bound, card["heldout_perplexity_radixlm"]))
        text = run([radixlm, "generate", "--model", gguf, "--prompt", "And God said", "--max-tokens", "32",
                    "--temperature", "0", "--json"])
        reply = json.loads(text).get("text", "")
        words = [w.strip(".,;:!?'\"()").lower() for w in reply.split()]
        common = sum(1 for w in words if w in COMMON)
        good = len(words) >= 8 and common >= 3
        ok &= good
        print("%s %s: greedy continuation of 'And God said': %r (%d common words)"
              % ("ok" if good else "FAIL", name, reply[:160], common))
    if total > MAX_TOTAL_BYTES:
        print("FAIL: the default models take %d bytes, over %d" % (total, MAX_TOTAL_BYTES))
        ok = False
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
