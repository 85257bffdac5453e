#!/usr/bin/env bash
# Cache simulator speed on a 100-session SWE-bench-like trace (contexts up to 32K tokens,
# generated with seed 0): for each policy, the wall time of `radixlm simulate` (trace parsing
# included) and the simulation alone, median of 3 runs, with requests per second and how many
# eviction candidates each victim search scored (indexed search) against the candidate set.
# Usage: bench/simulator_speed.sh [CACHE_SIZE=80GB] [ACCOUNTING=corrected|reference]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/build/src/cli/radixlm"
size="${1:-80GB}"
acc=""; [ "${2:-corrected}" = reference ] && acc="--reference-accounting"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
"$bin" simulate --generate swebench --sessions 100 --sps 1 --art 7.5 --seed 0 --out "$tmp/swe.jsonl" 2>/dev/null
for policy in vllm+ sglang+ marconi marconi-static; do
  alpha=""; [ $policy = marconi-static ] && alpha="--alpha 1.0"
  for i in 1 2 3; do
    start=$(date +%s.%N)
    "$bin" simulate --trace "$tmp/swe.jsonl" --cache-size "$size" --policy $policy $alpha $acc --json > "$tmp/r$i.json"
    end=$(date +%s.%N)
    python3 -c "import json; r=json.load(open('$tmp/r$i.json')); r['wall_s']=$end-$start; print(json.dumps(r))"
  done | python3 -c '
import json, statistics, sys
runs = [json.loads(l) for l in sys.stdin]
r = runs[0]
wall = statistics.median(x["wall_s"] for x in runs)
sim = statistics.median(x["seconds"] for x in runs)
s = max(1, r["victim_searches"])
print(json.dumps({"policy": r["policy"], "accounting": r["accounting"], "cache": r["cache_size_bytes"],
                  "requests": r["requests"], "input_tokens": r["input_tokens"], "wall_s": round(wall, 3),
                  "simulate_s": round(sim, 3), "requests_per_s_wall": round(r["requests"] / wall),
                  "requests_per_s_simulate": round(r["requests"] / sim), "token_hit_rate": round(r["token_hit_rate"], 4),
                  "victim_searches": r["victim_searches"], "scored_per_victim": round(r["victim_candidates_scored"] / s, 1),
                  "candidate_set": round(r["victim_candidate_set"] / s, 1)}))'
done
