#!/usr/bin/env bash
# The test command: set-up, build, and every test (unit, golden against PyTorch, CLI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 600
