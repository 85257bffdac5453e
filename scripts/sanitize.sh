#!/usr/bin/env bash
# The test suite under sanitizers, each in a build folder of its own (build-asan/, build-tsan/):
#   bash scripts/sanitize.sh asan [CTEST_REGEX]   AddressSanitizer + UndefinedBehaviorSanitizer
#                                                 (leaks included), the whole suite by default
#   bash scripts/sanitize.sh tsan [CTEST_REGEX]   ThreadSanitizer on the engine and server tests
# Any report fails the run (halt_on_error). GCC's runtimes (libasan8, libubsan1, libtsan2) come
# with the compiler set-up.sh installs. Slow (a full build at -O1 and a 2-4x slower suite):
# not part of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-asan}"
case "$mode" in
  asan)
    flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
    default_regex="."
    ;;
  tsan)
    flags="-fsanitize=thread"
    default_regex="Engine|Server|server|hostile|Scoring|Batch|ThreadPool|AlphaTuner"
    ;;
  *) echo "usage: sanitize.sh asan|tsan [CTEST_REGEX]" >&2; exit 2 ;;
esac
regex="${2:-$default_regex}"
bash scripts/setup.sh
dir="build-$mode"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize \
  -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -g $flags" \
  -DCMAKE_EXE_LINKER_FLAGS_SANITIZE="$flags" -DCMAKE_SHARED_LINKER_FLAGS_SANITIZE="$flags" >/dev/null
cmake --build "$dir" -j "$(nproc)"
# Leaks are checked (the default on Linux); OpenBLAS and oneDNN are not instrumented, so
# container-overflow reports across them are off. Python reference tests preload nothing: they
# drive our instrumented binaries.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:detect_container_overflow=0:abort_on_error=0"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan_suppressions.txt"
export RADIXLM_SOAK_RSS_SLACK_MIB=160  # ASan's quarantine (up to 256 MiB by default) grows RSS by design
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
cd "$dir"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
set +e
ctest --output-on-failure -j "$(nproc)" --timeout 1800 -R "$regex" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
reports=$(grep -cE '^(==[0-9]+==ERROR: |SUMMARY: (AddressSanitizer|UndefinedBehaviorSanitizer|ThreadSanitizer)|WARNING: ThreadSanitizer)' "$log" || true)
echo "sanitize $mode: ctest exit $rc, sanitizer reports $reports"
[ "$rc" -eq 0 ] && [ "$reports" -eq 0 ]
