#!/usr/bin/env bash
# The main job on the built-in default model (random:qwen3-0.6b, random weights of Qwen3-0.6B's
# shape, real Qwen3 tokenizer): set-up, build, then a scripted three-turn chat, each reply
# streamed, with what every turn cost. Extra arguments go to `radixlm chat`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/src/cli/radixlm info
printf '%s\n' \
  "Give me three tips for writing fast C++ code." \
  "Which of those matters most for an LLM inference engine?" \
  "Summarise our conversation in one sentence." |
  ./build/src/cli/radixlm chat --dtype bf16 --system "You are a concise assistant." --max-tokens 48 \
    --temperature 0.8 --top-p 0.95 --seed 1 "$@"
