#!/usr/bin/env bash
# Linux on ARM64, built here and tested under emulation (docs/arm64.md). Cross-compiles radixlm
# with Debian's g++-aarch64-linux-gnu against the arm64 multiarch libraries and runs the tests
# under qemu-user-static (CTest's emulator, cmake/aarch64-linux-gnu.cmake) at each dispatch
# level: QEMU_CPU=max (every feature: the i8mm level), neoverse-n1 (dotprod, no i8mm / bf16),
# cortex-a53 (ARMv8.0: NEON only).
#
#   bash scripts/test-arm64.sh            installs what it needs, builds build-arm64/, then:
#                                         core and kernel tests at the three levels; the model,
#                                         runner, cache, scheduler, sampling and engine tests and
#                                         the golden tests (PyTorch f64 references) at max; the
#                                         logits of the ARM build against the x86 build's, bitwise
#   bash scripts/test-arm64.sh --full     the same, then the whole suite at max (hours)
#   bash scripts/test-arm64.sh --kernels  what CI runs (a CTest of the x86 suite): no installs
#                                         (scripts/setup.sh made them; exit 77, skipped, without
#                                         them), the core and kernel libraries alone in
#                                         build-arm64-kernels/, the ISA equivalence tests at the
#                                         three levels
# On an aarch64 machine, use the README's two commands instead (they build natively).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-default}"

# The kernel tests that compare every dispatch level with the scalar oracle, and the CPU levels.
ISA_TESTS='CpuFeatures.*:GemmTest.EveryIsaPathEqualsTheScalarOracleBitwise:GemmTest.RowsAreBitwise*:GemmTest.GroupedRows*:Mamba2Scan.*:GatedDeltaRule.*:CausalConv1d.Every*:PagedAttentionTest.EveryIsa*:PagedAttentionTest.RowIsBitwiseIdenticalAloneAndInBatchForEveryKvDtype'
CPUS=(max neoverse-n1 cortex-a53)

if [ "$mode" = --kernels ]; then
  if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64-static >/dev/null ||
     ! dpkg-query -W -f='${Status}' libgtest-dev:arm64 2>/dev/null | grep -q "install ok installed"; then
    echo "SKIPPED: no ARM64 cross toolchain (g++-aarch64-linux-gnu, qemu-user-static, libgtest-dev:arm64; scripts/setup.sh installs them on x86-64)"
    exit 77
  fi
  cmake -S . -B build-arm64-kernels -G Ninja -DCMAKE_BUILD_TYPE=Release -DRADIXLM_KERNELS_ONLY=ON \
        -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake >/dev/null
  cmake --build build-arm64-kernels -j "$(nproc)" --target core_test kernels_test
  rc=0
  for cpu in "${CPUS[@]}"; do
    for t in core_test kernels_test; do
      out=$(QEMU_CPU=$cpu qemu-aarch64-static "build-arm64-kernels/src/${t%_test}/$t" --gtest_filter="$ISA_TESTS" 2>&1) || rc=1
      echo "$out" | grep -E "^detected|FAILED|Failure|PASSED|SKIPPED \]|tests? ran" | sed "s/^/[$cpu $t] /"
    done
  done
  exit "$rc"
fi

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
for cpu in "${CPUS[@]}"; do
  echo "== kernels and core under qemu -cpu $cpu"
  QEMU_CPU=$cpu ctest --output-on-failure -j "$(nproc)" --timeout 1800 -L '^(core_test|kernels_test)$' || rc=1
done
if [ "$mode" = --full ]; then
  QEMU_CPU=max ctest --output-on-failure -j "$(nproc)" --timeout 7200 || rc=1
else
  echo "== engine, models and the golden tests under qemu -cpu max"
  QEMU_CPU=max ctest --output-on-failure -j "$(nproc)" --timeout 3600 \
    -L '^(models_test|runner_test|cache_test|scheduler_test|sampling_test|engine_test|tier_test)$' || rc=1
  QEMU_CPU=max ctest --output-on-failure -j "$(nproc)" --timeout 3600 -R '^golden_' || rc=1
fi
# Logits of the ARM build against the x86 build's scalar paths (RADIXLM_ISA=scalar), at each
# level. With RADIXLM_ISA=scalar on ARM too, every model's are bitwise equal (the portable code,
# compiled with -ffp-contract=off as on x86). At the level's own kernels, the GEMM (f32, bf16,
# every quantised type), Gated DeltaNet and Mamba2 kernels are the oracle's arithmetic, so an
# attention-free model (random:mamba2-tiny) stays bitwise equal; attention on NEON folds its
# softmax in its own order (as AVX2's does), so models with attention agree to 1e-4 of their
# largest logit, and to 2e-2 with int8 activations (a last-bit difference before the activation
# quantiser moves a code by one step: x86's AVX2 and scalar paths differ by 4.6e-3 on
# tiny-q4_0, 7.1e-3 on tiny-q4_k_m). Random presets of each family and llama.cpp-quantised
# files (the int8 GEMM: sdot, smmla).
if [ -x ../build/src/cli/radixlm ] && [ "$(uname -m)" = x86_64 ]; then
  ids=$(seq -s, 101 397 20000 | cut -d, -f1-40)
  for m in random:mamba2-tiny random:tiny random:qwen35-tiny random:gemma3-tiny random:qwen3moe-tiny random:lfm2-tiny \
           ../tests/data/quant/tiny-q4_0.gguf ../tests/data/quant/tiny-q8_0.gguf ../tests/data/quant/tiny-q4_k_m.gguf \
           ../tests/data/quant/tiny-q5_k_m.gguf; do
    name=$(basename "$m" | tr ':' '_')
    tol=1e-4
    case "$m" in *tests/data/quant/*) ids=$(cat ../tests/data/quant/ids.txt); tol=2e-2 ;; esac  # their small vocabulary
    RADIXLM_ISA=scalar ../build/src/cli/radixlm logits -m "$m" --ids "$ids" -o "logits_x86_$name.bin" >/dev/null 2>&1
    for cpu in "${CPUS[@]}"; do
      for isa in scalar level; do
        env $([ $isa = scalar ] && echo RADIXLM_ISA=scalar) QEMU_CPU=$cpu qemu-aarch64-static src/cli/radixlm logits \
          -m "$m" --ids "$ids" -o "logits_arm_$name.bin" >/dev/null 2>&1
        exact=0; { [ $isa = scalar ] || [ "$m" = random:mamba2-tiny ]; } && exact=1
        /usr/bin/python3 - "logits_x86_$name.bin" "logits_arm_$name.bin" "$exact" "$m at $cpu ($isa)" "$tol" <<'PY' || rc=1
import sys, numpy as np
a, b = np.fromfile(sys.argv[1], np.float32), np.fromfile(sys.argv[2], np.float32)
exact, what = sys.argv[3] == "1", sys.argv[4]
if a.size != b.size or a.size == 0: print("FAIL", what, "no logits"); sys.exit(1)
if a.tobytes() == b.tobytes(): print("ok  ", what, "bitwise equal to the x86 scalar paths"); sys.exit(0)
rel = float(np.abs(a - b).max() / np.abs(a).max())
ok = not exact and rel <= float(sys.argv[5])
print("ok  " if ok else "FAIL", what, "max |diff| / max |logit| = %.2e" % rel, "(bitwise expected)" if exact else "")
sys.exit(0 if ok else 1)
PY
        [ $isa = level ] && cp "logits_arm_$name.bin" "logits_arm_${name}_$cpu.bin"
      done
    done
    # Between levels, bitwise: the int8 GEMM by smmla (max), sdot (neoverse-n1) and the scalar
    # oracle (cortex-a53) give the same bits, and every other ARM kernel is the same at each.
    for cpu in "${CPUS[@]:1}"; do
      if cmp -s "logits_arm_${name}_${CPUS[0]}.bin" "logits_arm_${name}_$cpu.bin"; then
        echo "ok   $m: the ARM build's logits at ${CPUS[0]} and $cpu are bitwise equal"
      else echo "FAIL $m: the ARM build's logits at ${CPUS[0]} and $cpu differ"; rc=1; fi
    done
  done
else
  echo "skip: no native x86 build beside (bash scripts/build.sh) for the logits comparison"
fi
exit "$rc"
