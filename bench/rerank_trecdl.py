#!/usr/bin/env python3
"""TREC-DL 2019 reranking through the server's /rerank (issue 7's end-to-end benchmark).

For each scoring threshold (0 = compaction off, 0.92 = on) starts `radixlm serve`, posts each
query with its BM25 top-N passages to /rerank (Qwen3-Reranker template, Qwen3 tokenizer),
and reports pairs per second, the compact/original row ratio from /metrics, and whether the
two runs returned the same scores (they must: compaction never changes an answer).
Usage: bench/rerank_trecdl.py [--radixlm BIN] [--queries 5] [--passages 100] [--out F.json] [--log F.jsonl]
--log appends one line per query (threshold, qid, pairs, seconds, tokens, computed tokens), so a run
cut short still yields per-query figures for the queries both thresholds finished. While a file
named PAUSE exists in the working directory, no new query starts (time paused is not counted).
Data: ../shared/data/rerank/trecdl19 (skipped with a message when absent)."""
import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def metric(base, name):
    for line in urllib.request.urlopen(base + "/metrics", timeout=30).read().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def run(args, threshold, queries):
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    cmd = [args.radixlm, "serve", "--model", args.model, "--threads", str(args.threads), "--port", str(port),
           "--kv-tokens", "1024", "--scoring-threshold", str(threshold), "--scoring-compaction", args.compaction,
           "--scoring-batch-tokens", str(args.batch_tokens)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except Exception:
                time.sleep(0.2)
        # Warm-up (allocates the scoring KV store); not timed, not counted.
        body = json.dumps({"query": "warm up", "texts": ["a passage"]}).encode()
        urllib.request.urlopen(urllib.request.Request(base + "/rerank", data=body,
                                                      headers={"Content-Type": "application/json"}), timeout=600).read()
        tokens0 = metric(base, "radixlm_scoring_tokens_total")
        computed0 = metric(base, "radixlm_scoring_computed_tokens_total")
        scores, per_query = [], []
        seconds = 0.0
        for q in queries:
            while os.path.exists("PAUSE"):
                time.sleep(5)
            tokens_q = metric(base, "radixlm_scoring_tokens_total")
            computed_q = metric(base, "radixlm_scoring_computed_tokens_total")
            body = json.dumps({"query": q["query"], "texts": q["texts"], "truncate": True}).encode()
            tq = time.time()
            with urllib.request.urlopen(urllib.request.Request(base + "/rerank", data=body,
                                                               headers={"Content-Type": "application/json"}),
                                        timeout=3600) as r:
                ranked = json.loads(r.read())
            elapsed = time.time() - tq
            seconds += elapsed
            per_query.append(len(q["texts"]) / elapsed)
            if args.log:
                with open(args.log, "a") as log:
                    log.write(json.dumps({"threshold": threshold, "qid": q["qid"], "pairs": len(q["texts"]),
                                          "seconds": elapsed,
                                          "tokens": metric(base, "radixlm_scoring_tokens_total") - tokens_q,
                                          "computed_tokens": metric(base, "radixlm_scoring_computed_tokens_total")
                                          - computed_q}) + "\n")
            by_index = [0.0] * len(q["texts"])
            for item in ranked:
                by_index[item["index"]] = item["score"]
            scores.append(by_index)
        tokens = metric(base, "radixlm_scoring_tokens_total") - tokens0
        computed = metric(base, "radixlm_scoring_computed_tokens_total") - computed0
    finally:
        proc.terminate()
        proc.wait(30)
    pairs = sum(len(q["texts"]) for q in queries)
    per_query.sort()
    return {"threshold": threshold, "pairs": pairs, "seconds": seconds, "pairs_per_s": pairs / seconds,
            "median_query_pairs_per_s": per_query[len(per_query) // 2], "tokens": tokens, "computed_tokens": computed,
            "compact_ratio": computed / tokens if tokens else 1.0}, scores


def ndcg10(scores, queries, qrels):
    import math
    total = 0.0
    for s, q in zip(scores, queries):
        rel = qrels.get(q["qid"], {})
        order = sorted(range(len(s)), key=lambda i: -s[i])[:10]
        dcg = sum((2 ** rel.get(q["docids"][i], 0) - 1) / math.log2(k + 2) for k, i in enumerate(order))
        ideal = sorted(rel.values(), reverse=True)[:10]
        idcg = sum((2 ** g - 1) / math.log2(k + 2) for k, g in enumerate(ideal))
        total += dcg / idcg if idcg else 0.0
    return total / len(queries)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--radixlm", default=os.path.join(HERE, "..", "build", "src", "cli", "radixlm"))
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data", "rerank", "trecdl19"))
    ap.add_argument("--model", default="random:qwen3-0.6b")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--queries", type=int, default=5)
    ap.add_argument("--passages", type=int, default=100)
    ap.add_argument("--batch-tokens", type=int, default=8192)
    ap.add_argument("--compaction", default="trie")
    ap.add_argument("--thresholds", default="0,0.92")
    ap.add_argument("--out")
    ap.add_argument("--log")
    args = ap.parse_args()
    path = os.path.join(args.data, "bm25_top100_dl19.json")
    if not os.path.exists(path):
        print("skipped: %s not found" % path)
        return 0
    data = json.load(open(path))
    queries = [{"query": d["query"], "qid": str(d["hits"][0].get("qid", "")) if d["hits"] else "",
                "texts": [h["content"] for h in d["hits"][:args.passages]],
                "docids": [str(h.get("docid", "")) for h in d["hits"][:args.passages]]}
               for d in data[:args.queries]]
    qrels = {}
    qrels_path = os.path.join(args.data, "qrels_dl19.txt")
    if os.path.exists(qrels_path):
        for line in open(qrels_path):
            parts = line.split()
            if len(parts) == 4:
                qrels.setdefault(parts[0], {})[parts[2]] = int(parts[3])
    results, all_scores = [], []
    for t in [float(x) for x in args.thresholds.split(",")]:
        r, scores = run(args, t, queries)
        r["ndcg@10"] = ndcg10(scores, queries, qrels)
        results.append(r)
        all_scores.append(scores)
        print(json.dumps(r), flush=True)
    summary = {"model": args.model, "queries": len(queries), "passages": args.passages, "compaction": args.compaction,
               "runs": results, "same_scores": all(s == all_scores[0] for s in all_scores)}
    off = [r for r in results if r["threshold"] == 0]
    on = [r for r in results if r["threshold"] != 0]
    if off and on:
        summary["speedup"] = on[-1]["pairs_per_s"] / off[0]["pairs_per_s"]
        summary["ideal_speedup"] = 1.0 / on[-1]["compact_ratio"] if on[-1]["compact_ratio"] else None
    print(json.dumps(summary))
    if args.out:
        json.dump(summary, open(args.out, "w"), indent=1)
    return 0 if summary["same_scores"] else 1


if __name__ == "__main__":
    sys.exit(main())
