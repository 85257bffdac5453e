#!/usr/bin/env bash
# The main job on the built-in default model (random:qwen3-0.6b): set-up, build, then
# generation with the cost printed. Extra arguments go to `radixlm generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/src/cli/radixlm info
exec ./build/src/cli/radixlm generate --ids 151644,872,198,9707,11,1246,525,498,30,151645,198,151644,77091,198 --max-tokens 32 "$@"
