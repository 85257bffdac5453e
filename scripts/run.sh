#!/usr/bin/env bash
# The main job on the default model (models/kjv-qwen3.gguf, a small model trained on the King
# James Bible; RADIXLM_MODEL picks another): set-up, build, then
#   1. a three-turn chat through the serving engine and its radix prefix cache, each reply
#      streamed, each turn's prompt / cached / computed tokens and timings printed; then two
#      turns on the hybrid model (Qwen3.5 layout: Gated DeltaNet + gated attention), whose cache
#      holds recurrent-state checkpoints;
#   2. the other sharing paths, each against the plain path in the same run (scripts/second_act.py).
# Extra arguments go to the first `radixlm chat`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
B=./build/src/cli/radixlm
MODEL="${RADIXLM_MODEL:-models/kjv-qwen3.gguf}"
HYBRID="${RADIXLM_HYBRID_MODEL:-models/kjv-qwen35.gguf}"

echo
echo "== 1. A conversation through the engine: each turn computes only what is new"
"$B" info "$MODEL"
printf '%s\n' \
  "In the beginning God created the heaven and the earth." \
  "And God said, Let there be light: and there was light." \
  "What did God call the light?" |
  "$B" chat "$MODEL" --system "Answer in the words of the King James Bible." --max-tokens 32 \
    --temperature 0.7 --top-p 0.9 --seed 1 "$@"

if [ -f "$HYBRID" ]; then
  echo
  echo "== 1b. The same on the hybrid model (Gated DeltaNet): the cache keeps recurrent-state checkpoints (Marconi's policy)"
  "$B" info "$HYBRID"
  printf '%s\n' \
    "The LORD is my shepherd; I shall not want." \
    "He maketh me to lie down in green pastures." |
    "$B" chat "$HYBRID" --system "Answer in the words of the King James Bible." --max-tokens 40 \
      --temperature 0.7 --top-p 0.9 --seed 1
fi

echo
echo "== 2. The other sharing paths, each against the plain path (medians of 3, alternated)"
python3 scripts/second_act.py "$B" "$MODEL"
