#!/usr/bin/env bash
# Linux on ARM64, built here and tested under emulation: cross-compiles radixlm with Debian's
# g++-aarch64-linux-gnu against the arm64 multiarch libraries (installed first), into
# build-arm64/, then runs the tests under qemu-user-static (CTest's emulator,
# cmake/aarch64-linux-gnu.cmake):
#   - the core and kernel tests at every CPU level the dispatch knows of: QEMU_CPU=max (every
#     feature: dotprod, i8mm, bf16, SVE), neoverse-n1 (dotprod, no i8mm / bf16), cortex-a53
#     (plain ARMv8.0: NEON only);
#   - with --full, the whole suite once at max (hours under emulation), else the engine and model
#     tests that need no data beyond the repository.
# On an aarch64 machine, use the README's two commands instead (they build natively).
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
[ "${1:-}" = "--full" ] && full=1

ARM_PACKAGES=(
  g++-aarch64-linux-gnu qemu-user-static
  libgtest-dev:arm64 libgmock-dev:arm64 libbenchmark-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64
  libzmq3-dev:arm64 libssl-dev:arm64 libhiredis-dev:arm64 libopenblas-dev:arm64 libcpp-httplib-dev:arm64
)
# The native set-up first (headers the cross build shares: Boost, nlohmann-json, CLI11, msgpack).
bash scripts/setup.sh
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
fi
missing=()
for p in "${ARM_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build-arm64 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake >/dev/null
cmake --build build-arm64 -j "$(nproc)"

cd build-arm64
rc=0
for cpu in max neoverse-n1 cortex-a53; do
  echo "== kernels and core under qemu -cpu $cpu"
  QEMU_CPU=$cpu ctest --output-on-failure -j "$(nproc)" --timeout 1800 -L '^(core_test|kernels_test)$' || rc=1
done
if [ "$full" = 1 ]; then
  QEMU_CPU=max ctest --output-on-failure -j "$(nproc)" --timeout 7200 || rc=1
else
  echo "== engine and models under qemu -cpu max"
  QEMU_CPU=max ctest --output-on-failure -j "$(nproc)" --timeout 3600 -L '^(models_test|runner_test|cache_test|scheduler_test|sampling_test)$' || rc=1
fi
# Logits of the ARM build against the x86 build's scalar paths (the same arithmetic order:
# -ffp-contract=off on ARM, RADIXLM_ISA=scalar on x86), bitwise, on random presets of each
# family (attention, Gated DeltaNet, Mamba2, sliding window, MoE, LFM2 short convolutions).
if [ -x ../build/src/cli/radixlm ] && [ "$(uname -m)" = x86_64 ]; then
  ids=$(seq -s, 101 397 20000 | cut -d, -f1-40)
  for m in tiny qwen35-tiny mamba2-tiny gemma3-tiny qwen3moe-tiny lfm2-tiny; do
    RADIXLM_ISA=scalar ../build/src/cli/radixlm logits -m "random:$m" --ids "$ids" -o "logits_x86_$m.bin" >/dev/null 2>&1
    QEMU_CPU=max qemu-aarch64-static src/cli/radixlm logits -m "random:$m" --ids "$ids" -o "logits_arm_$m.bin" >/dev/null 2>&1
    if cmp -s "logits_x86_$m.bin" "logits_arm_$m.bin"; then echo "ok   logits of random:$m: the ARM build's equal the x86 scalar paths' bitwise"
    else echo "FAIL logits of random:$m differ between the ARM build and the x86 scalar paths"; rc=1; fi
  done
else
  echo "skip: no native x86 build beside (bash scripts/build.sh) for the logits comparison"
fi
exit "$rc"
