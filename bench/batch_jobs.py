#!/usr/bin/env python3
"""Writes OpenAI Batch JSONL jobs for `radixlm batch` (measurements and tests).

  synthetic  BatchLLM-style: groups of --members-min..max requests sharing a --prefix-min..max
             token prefix, each with --unique-min..max tokens of its own, --max-tokens to
             generate; prompts as token ids (no tokenizer needed); lines shuffled.
  trec       TREC-DL 2019 from --shared DIR/data (castorini/rank_llm's BM25 top-100): one /rerank
             line per (query, passage) pair, shuffled (--per-query: one line per query instead).
  mtbench    MT-Bench first turns (lm-sys/FastChat) as chat completions under one shared system
             prompt.
Deterministic for a given --seed.
"""
import argparse
import json
import os
import random
import sys


def synthetic(a, rng):
    lines = []
    for g in range(a.groups):
        prefix = [rng.randrange(100, a.vocab - 100) for _ in range(rng.randint(a.prefix_min, a.prefix_max))]
        for m in range(rng.randint(a.members_min, a.members_max)):
            own = [rng.randrange(100, a.vocab - 100) for _ in range(rng.randint(a.unique_min, a.unique_max))]
            lines.append({"custom_id": "g%d-m%d" % (g, m), "method": "POST", "url": "/v1/completions",
                          "body": {"prompt": prefix + own, "max_tokens": a.max_tokens, "temperature": 0,
                                   "ignore_eos": True} if a.ignore_eos else
                                  {"prompt": prefix + own, "max_tokens": a.max_tokens, "temperature": 0}})
    return lines


def trec(a, rng):
    path = os.path.join(a.shared, "data/rerank/trecdl19/bm25_top100_dl19.json")
    with open(path) as f:
        data = json.load(f)
    lines = []
    for qi, q in enumerate(data[: a.queries]):
        hits = q["hits"][: a.passages]
        if a.per_query:
            lines.append({"custom_id": "q%d" % qi, "method": "POST", "url": "/rerank",
                          "body": {"query": q["query"], "texts": [h["content"] for h in hits], "raw_scores": True}})
            continue
        for h in hits:
            lines.append({"custom_id": "q%d-%s" % (qi, h["docid"]), "method": "POST", "url": "/rerank",
                          "body": {"query": q["query"], "texts": [h["content"]], "raw_scores": True}})
    return lines


def mtbench(a, rng):
    path = os.path.join(a.shared, "data/chat/mt_bench_questions.jsonl")
    system = ("You are a careful, helpful assistant. Answer the user's question accurately and concisely. "
              "If a question is ambiguous, state your assumptions. Use plain language, show your reasoning for "
              "math and coding questions, and keep answers under two hundred words. ") * a.system_repeat
    lines = []
    with open(path) as f:
        for i, l in enumerate(f):
            q = json.loads(l)
            lines.append({"custom_id": "mt-%d" % i, "method": "POST", "url": "/v1/chat/completions",
                          "body": {"messages": [{"role": "system", "content": system},
                                                {"role": "user", "content": q["turns"][0]}],
                                   "max_tokens": a.max_tokens, "temperature": 0}})
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=["synthetic", "trec", "mtbench"])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--shared", help="the shared folder holding data/ (trec, mtbench)")
    p.add_argument("--vocab", type=int, default=151936)
    p.add_argument("--groups", type=int, default=50)
    p.add_argument("--members-min", type=int, default=16)
    p.add_argument("--members-max", type=int, default=64)
    p.add_argument("--prefix-min", type=int, default=1024)
    p.add_argument("--prefix-max", type=int, default=4096)
    p.add_argument("--unique-min", type=int, default=100)
    p.add_argument("--unique-max", type=int, default=300)
    p.add_argument("--max-tokens", type=int, default=100)
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--queries", type=int, default=43)
    p.add_argument("--passages", type=int, default=100)
    p.add_argument("--per-query", action="store_true")
    p.add_argument("--system-repeat", type=int, default=4)
    p.add_argument("--no-shuffle", action="store_true")
    a = p.parse_args()
    if a.kind != "synthetic" and not a.shared:
        p.error("%s needs --shared DIR (the folder with data/rerank and data/chat)" % a.kind)
    rng = random.Random(a.seed)
    lines = {"synthetic": synthetic, "trec": trec, "mtbench": mtbench}[a.kind](a, rng)
    if not a.no_shuffle:
        rng.shuffle(lines)
    with open(a.out, "w") as f:
        for l in lines:
            f.write(json.dumps(l) + "\n")
    print("wrote %d lines to %s" % (len(lines), a.out), file=sys.stderr)


if __name__ == "__main__":
    main()
