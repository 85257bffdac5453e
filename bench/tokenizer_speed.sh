#!/usr/bin/env bash
# Single-thread encode throughput on the KJV Bible (Debian bible-kjv), radixlm next to the
# JavaScript reference tokenizer measured in the same run; median of 3 runs each.
# Usage: bench/tokenizer_speed.sh [FAMILY=qwen3]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
family="${1:-qwen3}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
bible gen1:1-rev22:21 | python3 -c '
import json, sys
lines = sys.stdin.read().split("\n")
for i in range(0, len(lines), 20): print(json.dumps({"text": "\n".join(lines[i:i + 20])}))' > "$tmp/kjv.jsonl"
export NODE_PATH="$root/third_party_data/npm/node_modules"
median() { sort -n | sed -n 2p; }
js=$(for i in 1 2 3; do node "$root/tests/reference/tokenizer_ref.js" "$family" "$tmp/kjv.jsonl" - --bench | python3 -c 'import json,sys; print(json.load(sys.stdin)["mb_per_s"])'; done | median)
cpp=$(for i in 1 2 3; do taskset -c 0 "$root/build/src/cli/radixlm" tokenize --tokenizer "$family" --input "$tmp/kjv.jsonl" --bench | python3 -c 'import json,sys; print(json.load(sys.stdin)["mb_per_s"])'; done | median)
python3 -c "import json; print(json.dumps({'family': '$family', 'corpus': 'KJV (bible-kjv)', 'radixlm_mb_per_s': $cpp, 'javascript_mb_per_s': $js, 'ratio': $cpp / $js}))"
