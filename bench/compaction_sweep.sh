#!/usr/bin/env bash
# RadixMLP sweep (issue 7): 32 sequences, shared prefix P x suffix S, compaction off | gather |
# trie run back to back per cell. Resumable: cells already in OUT are skipped, so the sweep can
# be interrupted (a half-run cell is simply run again). While the file PAUSE exists no new cell
# starts (lets a build run without skewing a measurement).
# Usage: bench/compaction_sweep.sh [RADIXLM] [OUT.jsonl]
set -u
BIN=${1:-build/src/cli/radixlm}
OUT=${2:-compaction_sweep.jsonl}
PAUSE=${PAUSE:-$OUT.pause}
MODEL=${MODEL:-random:qwen3-0.6b}
PREFIXES=${PREFIXES:-"0 256 512 1024"}
SUFFIXES=${SUFFIXES:-"32 64 128 256"}
touch "$OUT"
for pass in 1 2 3; do  # later passes rerun cells an interruption lost
for p in $PREFIXES; do
  for s in $SUFFIXES; do
    for mode in off gather trie; do
      if grep -q "\"compaction\":\"$mode\".*\"shared_prefix\":$p,\"suffix\":$s," "$OUT"; then continue; fi
      while [ -e "$PAUSE" ]; do sleep 5; done
      # off and gather (attention on every original row) are the expensive ones: one run; trie: median of 3.
      reps=3; [ "$mode" != trie ] && reps=1
      line=$("$BIN" bench -m "$MODEL" --threads 2 --batch 32 --shared-prefix "$p" --suffix "$s" \
               --compaction "$mode" --repeats "$reps" --json 2>/dev/null) && echo "$line" >> "$OUT"
    done
  done
done
done
