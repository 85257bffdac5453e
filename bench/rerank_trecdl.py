#!/usr/bin/env python3
"""TREC-DL 2019 reranking through the server's /rerank (issue 7's end-to-end benchmark).

Starts one `radixlm serve` per scoring threshold (0 = compaction off, 0.92 = on), both up at
once, and posts each query with its BM25 top-N passages to /rerank (Qwen3-Reranker template,
Qwen3 tokenizer) on every server back to back, alternating which goes first. Interleaving makes
the machine's drift fall on both sides alike, and a run cut short still is a paired sample.
Only one server computes at a time (an idle server's workers sleep).

Reports pairs per second per threshold (summed over the queries), the median per-query
speedup, the compact/original row ratio from /metrics, nDCG@10 against the qrels, and whether
every threshold returned the same scores (it must: compaction never changes an answer).

--log F.jsonl appends one line per (query, threshold) with its time, tokens and scores; a run
restarted with the same log skips what is there (no query lost or measured twice) and the
summary covers every logged query. While a file named PAUSE exists in the working directory no
new query starts. Usage:
  bench/rerank_trecdl.py [--radixlm BIN] [--queries 43] [--passages 100] [--log F.jsonl] [--out F.json]
Data: --data, a TREC-DL 2019 folder (the workplace keeps one in its shared data)."""
import argparse
import json
import math
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


class Server:
    """One `radixlm serve` at one scoring threshold."""

    def __init__(self, args, threshold):
        self.threshold = threshold
        port = free_port()
        self.base = "http://127.0.0.1:%d" % port
        cmd = [args.radixlm, "serve", "--model", args.model, "--threads", str(args.threads), "--port", str(port),
               "--kv-tokens", "1024", "--scoring-threshold", str(threshold), "--scoring-compaction", args.compaction,
               "--scoring-batch-tokens", str(args.batch_tokens)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):
            if self.proc.poll() is not None:
                raise RuntimeError("radixlm serve exited with %d: %s" % (self.proc.returncode, " ".join(cmd)))
            try:
                urllib.request.urlopen(self.base + "/health", timeout=1)
                break
            except Exception:
                time.sleep(0.2)
        self.rerank("warm up", ["a passage"])  # allocates the scoring KV store; not counted

    def metric(self, name):
        text = urllib.request.urlopen(self.base + "/metrics", timeout=30).read().decode()
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0

    def rerank(self, query, texts):
        body = json.dumps({"query": query, "texts": texts, "truncate": True}).encode()
        request = urllib.request.Request(self.base + "/rerank", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=3600) as r:
            ranked = json.loads(r.read())
        by_index = [0.0] * len(texts)
        for item in ranked:
            by_index[item["index"]] = item["score"]
        return by_index

    def measure(self, q):
        tokens = self.metric("radixlm_scoring_tokens_total")
        computed = self.metric("radixlm_scoring_computed_tokens_total")
        start = time.time()
        scores = self.rerank(q["query"], q["texts"])
        seconds = time.time() - start
        return {"threshold": self.threshold, "qid": q["qid"], "pairs": len(q["texts"]), "seconds": seconds,
                "tokens": self.metric("radixlm_scoring_tokens_total") - tokens,
                "computed_tokens": self.metric("radixlm_scoring_computed_tokens_total") - computed,
                "scores": scores}

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


def ndcg10(scores, docids, rel):
    order = sorted(range(len(scores)), key=lambda i: -scores[i])[:10]
    dcg = sum((2 ** rel.get(docids[i], 0) - 1) / math.log2(k + 2) for k, i in enumerate(order))
    ideal = sorted(rel.values(), reverse=True)[:10]
    idcg = sum((2 ** g - 1) / math.log2(k + 2) for k, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def summarize(args, thresholds, queries, records, qrels):
    """Figures over the queries every threshold has finished."""
    done = [q for q in queries if all((t, q["qid"]) in records for t in thresholds)]
    runs = []
    for t in thresholds:
        rs = [records[(t, q["qid"])] for q in done]
        pairs, seconds = sum(r["pairs"] for r in rs), sum(r["seconds"] for r in rs)
        tokens, computed = sum(r["tokens"] for r in rs), sum(r["computed_tokens"] for r in rs)
        runs.append({"threshold": t, "pairs": pairs, "seconds": round(seconds, 2),
                     "pairs_per_s": pairs / seconds if seconds else None,
                     "median_query_pairs_per_s": median([r["pairs"] / r["seconds"] for r in rs]) if rs else None,
                     "tokens": tokens, "computed_tokens": computed,
                     "compact_ratio": computed / tokens if tokens else 1.0,
                     "ndcg@10": (sum(ndcg10(r["scores"], q["docids"], qrels.get(q["qid"], {}))
                                     for r, q in zip(rs, done)) / len(done)) if done else None})
    summary = {"model": args.model, "queries": len(done), "passages": args.passages, "compaction": args.compaction,
               "runs": runs,
               "same_scores": all(records[(t, q["qid"])]["scores"] == records[(thresholds[0], q["qid"])]["scores"]
                                  for t in thresholds for q in done)}
    if 0.0 in thresholds and len(thresholds) > 1 and done:
        off, on = runs[thresholds.index(0.0)], runs[-1 if thresholds[-1] != 0.0 else 0]
        summary["speedup"] = on["pairs_per_s"] / off["pairs_per_s"]
        summary["median_query_speedup"] = median([records[(0.0, q["qid"])]["seconds"] /
                                                  records[(on["threshold"], q["qid"])]["seconds"] for q in done])
        summary["ideal_speedup"] = 1.0 / on["compact_ratio"] if on["compact_ratio"] else None
    return summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--radixlm", default=os.path.join(HERE, "..", "build", "src", "cli", "radixlm"))
    ap.add_argument("--data", required=True, help="the TREC-DL 2019 folder (e.g. the workplace's shared/data/rerank/trecdl19)")
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
    thresholds = [float(x) for x in args.thresholds.split(",")]

    records = {}  # (threshold, qid) -> record; the log's lines first, so a restart resumes
    if args.log and os.path.exists(args.log):
        for line in open(args.log):
            if line.strip():
                r = json.loads(line)
                if r.get("pairs") == args.passages:
                    records[(r["threshold"], r["qid"])] = r
    todo = [q for q in queries if any((t, q["qid"]) not in records for t in thresholds)]
    servers = [Server(args, t) for t in thresholds] if todo else []
    try:
        for i, q in enumerate(todo):
            while os.path.exists("PAUSE"):
                time.sleep(5)
            for server in (servers if i % 2 == 0 else servers[::-1]):
                if (server.threshold, q["qid"]) in records:
                    continue
                r = server.measure(q)
                records[(server.threshold, q["qid"])] = r
                if args.log:
                    with open(args.log, "a") as log:
                        log.write(json.dumps(r) + "\n")
                print("qid %s threshold %g: %.2f pairs/s, computed %d of %d tokens" %
                      (q["qid"], r["threshold"], r["pairs"] / r["seconds"], r["computed_tokens"], r["tokens"]),
                      flush=True)
    finally:
        for server in servers:
            server.stop()

    summary = summarize(args, thresholds, queries, records, qrels)
    print(json.dumps(summary))
    if args.out:
        json.dump(summary, open(args.out, "w"), indent=1)
    return 0 if summary["same_scores"] else 1


if __name__ == "__main__":
    sys.exit(main())
