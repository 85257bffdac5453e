#!/usr/bin/env bash
# The test command: set-up, build, and every test (unit, golden against PyTorch, CLI). Tests
# whose optional data (../shared beside the repo) or CPU feature is absent report SKIPPED; the
# last line counts them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
set +e
ctest --output-on-failure -j "$(nproc)" --timeout 600 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
total=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#' "$log" || true)
skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#.*\*\*\*Skipped' "$log" || true)
failed=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#.*(\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Not Run)' "$log" || true)
echo "radixlm tests: $((total - skipped - failed)) passed, $skipped skipped, $failed failed (of $total)"
if [ "$skipped" -gt 0 ]; then echo "  (skipped: optional data absent (RADIXLM_SHARED_DATA) or a CPU feature this machine lacks; listed above)"; fi
exit "$rc"
