#!/usr/bin/env python3
"""The main job's second act: the other sharing paths on one screen, each measured against the
plain path in the same run (alternated, medians of 3).

  1. Eight requests with one 200-token system prompt, prefilled in one forward: RadixMLP computes
     the shared rows once (radixlm bench --batch, compaction off vs trie).
  2. One query reranked over 50 passages (Genesis 1-2, from Debian's bible-kjv): the query and the
     template are computed once for all passages (radixlm rerank, compaction off vs on); the
     scores must be identical.

Usage: second_act.py RADIXLM MODEL"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile


def run_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index("{"):])


def kjv_passages(n):
    out = subprocess.run(["bible", "gen1:1-gen3:24"], capture_output=True, text=True, check=True).stdout
    verses = []
    for line in out.split("\n"):
        m = re.match(r"^\s+(\d+) (.*)$", line)
        if m:
            verses.append(m.group(2).strip())
        elif line.strip() and verses and not re.match(r"^\S.* \d+$", line):
            verses[-1] += " " + line.strip()
    return verses[:n]


def main():
    radixlm, model = sys.argv[1], sys.argv[2]
    base = [radixlm, "bench", "--model", model, "--batch", "8", "--shared-prefix", "200", "--suffix", "40", "--repeats", "3"]
    runs = {"off": [], "trie": []}
    for _ in range(3):
        for mode in ("off", "trie"):
            runs[mode].append(run_json(base + ["--compaction", mode]))
    rate = {m: statistics.median(r["tokens_per_s"] for r in runs[m]) for m in runs}
    rows = {m: runs[m][0]["observed_ratio"] if m == "trie" else 1.0 for m in runs}
    print("1. 8 requests sharing a 200-token prefix (+40 tokens each; random token ids), prefilled in one forward:")
    print("   plain: %d rows computed, %.0f tok/s | RadixMLP: %d rows computed (%.0f%%), %.0f tok/s -> %.2fx faster"
          % (8 * 240, rate["off"], round(8 * 240 * rows["trie"]), 100 * rows["trie"], rate["trie"],
             rate["trie"] / rate["off"]))

    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "rerank.jsonl")
        with open(data, "w") as f:
            f.write(json.dumps({"query": "Who made the heaven and the earth?", "documents": kjv_passages(50)}) + "\n")
        seconds = {"0": [], "1": []}
        summary = {}
        for _ in range(3):
            for threshold in ("0", "1"):
                out = os.path.join(tmp, "scores_%s.jsonl" % threshold)
                s = run_json([radixlm, "rerank", "--model", model, "--input", data, "--threshold", threshold,
                              "--json", "--out", out])
                seconds[threshold].append(s["seconds"])
                summary[threshold] = s
        same = open(os.path.join(tmp, "scores_0.jsonl")).read() == open(os.path.join(tmp, "scores_1.jsonl")).read()
        best = json.loads(open(os.path.join(tmp, "scores_1.jsonl")).readline())
    off, on = statistics.median(seconds["0"]), statistics.median(seconds["1"])
    print("2. one query reranked over 50 passages (Genesis 1-2):")
    print("   plain: %d tokens computed in %.0f ms | shared prefix computed once: %d tokens in %.0f ms -> %.2fx faster; "
          "scores %s" % (summary["0"]["computed_tokens"], off * 1e3, summary["1"]["computed_tokens"], on * 1e3, off / on,
                         "identical" if same else "DIFFERENT"))
    scores = best.get("scores") or []
    if scores:
        top = max(range(len(scores)), key=lambda i: scores[i])
        print("   (top passage by this small model's yes/no logit: #%d; it was not trained to rerank)" % (top + 1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
