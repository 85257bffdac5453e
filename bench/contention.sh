#!/usr/bin/env bash
# Decode speed when other work takes CPU time: radixlm and llama.cpp on the same GGUF files, each
# measured quiet and beside CPU hogs (busy processes, one pinned to each of the last --hogs cores),
# engines and conditions alternated per round (benchmark only).
#
#   bench/contention.sh [--rounds 3] [--threads 2] [--hogs 1] [--gen-tokens 128]
#                       [--files models/kjv-qwen3.gguf,WORK/dense-q4_0.gguf] [--work DIR] [--unpinned]
#
# radixlm: `radixlm bench --prompt-tokens 16 --gen-tokens G --repeats 3` (its decode after a
# 16-token prompt); llama.cpp: `llama-bench -p 0 -n G -d 16 -r 3` (the same condition). The
# llama.cpp build and the Qwen3-0.6B-shape Q4_0 file are bench/vs_llamacpp.sh's (made here with
# its --prepare-only if absent). The table: per file and engine, quiet and hogged decode (medians
# over rounds), hogged / quiet, and radixlm / llama.cpp under the hogs (median of per-round
# ratios). --unpinned lets the OS place the hogs. RADIXLM=path picks the radixlm binary (default
# build/src/cli/radixlm). Raw results: DIR/contention.jsonl. DIR defaults to build/vs_llamacpp.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3 THREADS=2 HOGS=1 GEN=128 WORK=build/vs_llamacpp FILES="" PIN=1
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --hogs) HOGS=$2; shift 2 ;;
    --gen-tokens) GEN=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --unpinned) PIN=0; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
[ -n "$FILES" ] || FILES=models/kjv-qwen3.gguf,$WORK/dense-q4_0.gguf
RADIXLM=${RADIXLM:-$PWD/build/src/cli/radixlm}
LL=$WORK/llama.cpp/build/bin
PY=/usr/bin/python3
need_q4=0
for f in ${FILES//,/ }; do [ -f "$f" ] || need_q4=1; done
if [ ! -x "$LL/llama-bench" ] || [ "$need_q4" = 1 ]; then
  bash bench/vs_llamacpp.sh --work "$WORK" --models dense --types q4_0 --threads "$THREADS" --prepare-only
fi
for f in ${FILES//,/ }; do [ -f "$f" ] || { echo "no such file: $f" >&2; exit 2; }; done
export LD_LIBRARY_PATH="$LL${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

NCPU=$(nproc)
HOG_PIDS=()
start_hogs() {
  for h in $(seq 1 "$HOGS"); do
    if [ "$PIN" = 1 ]; then taskset -c $((NCPU - h)) sh -c 'while :; do :; done' &
    else sh -c 'while :; do :; done' &
    fi
    HOG_PIDS+=($!)
  done
  sleep 0.5
}
stop_hogs() {
  [ ${#HOG_PIDS[@]} -gt 0 ] && kill "${HOG_PIDS[@]}" 2>/dev/null && wait "${HOG_PIDS[@]}" 2>/dev/null || true
  HOG_PIDS=()
}
trap stop_hogs EXIT

RESULTS=$WORK/contention.jsonl
: > "$RESULTS"
run() {  # engine file condition round
  local tps
  if [ "$1" = radixlm ]; then
    tps=$("$RADIXLM" bench -m "$2" --threads "$THREADS" --prompt-tokens 16 --gen-tokens "$GEN" --repeats 3 --json 2>/dev/null |
          $PY -c "import json,sys; print(json.loads(sys.stdin.readline())['decode_tokens_per_s'])")
  else
    tps=$("$LL/llama-bench" -m "$2" -t "$THREADS" -p 0 -n "$GEN" -d 16 -r 3 -o json 2>/dev/null |
          $PY -c "import json,sys; print(json.load(sys.stdin)[0]['avg_ts'])")
  fi
  echo "{\"engine\":\"$1\",\"file\":\"$(basename "$2")\",\"condition\":\"$3\",\"round\":$4,\"decode\":$tps}" >> "$RESULTS"
  echo "round $4 $(basename "$2") $1 $3: $tps tok/s" >&2
}
for r in $(seq 1 "$ROUNDS"); do
  for f in ${FILES//,/ }; do
    engines="radixlm llama.cpp"; [ $((r % 2)) = 0 ] && engines="llama.cpp radixlm"
    for e in $engines; do run "$e" "$f" quiet "$r"; done
    start_hogs
    for e in $engines; do run "$e" "$f" hogged "$r"; done
    stop_hogs
  done
done

CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
$PY - "$RESULTS" "$CPU" "$THREADS" "$HOGS" "$NCPU" "$ROUNDS" "$GEN" "$PIN" <<'EOF' | tee "$WORK/contention.md"
import json, statistics, sys
path, cpu, threads, hogs, ncpu, rounds, gen, pin = sys.argv[1:9]
rows = [json.loads(l) for l in open(path)]
med = lambda xs: statistics.median(xs) if xs else float("nan")
where = "pinned to the last core(s)" if pin == "1" else "placed by the OS"
print(f"CPU: {cpu}, {ncpu} cores; both engines {threads} threads; {hogs} busy process(es) {where}; decode of {gen} tokens after 16; {rounds} rounds, engines alternated; medians\n")
print("| file | engine | quiet tok/s | hogged tok/s | hogged / quiet | radixlm / llama.cpp hogged (quiet) |")
print("|---|---|---|---|---|---|")
for f in dict.fromkeys(r["file"] for r in rows):
    v = lambda e, c: {r["round"]: r["decode"] for r in rows if r["file"] == f and r["engine"] == e and r["condition"] == c}
    for e in ("radixlm", "llama.cpp"):
        q, h = v(e, "quiet"), v(e, "hogged")
        ratio = ""
        if e == "radixlm":
            lq, lh = v("llama.cpp", "quiet"), v("llama.cpp", "hogged")
            rh = med([h[i] / lh[i] for i in h if i in lh]); rq = med([q[i] / lq[i] for i in q if i in lq])
            ratio = f"{rh:.2f}x ({rq:.2f}x)"
        print(f"| {f} | {e} | {med(list(q.values())):.1f} | {med(list(h.values())):.1f} | "
              f"{med([h[i] / q[i] for i in h if i in q]):.2f} | {ratio} |")
EOF
