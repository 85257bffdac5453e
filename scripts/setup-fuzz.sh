#!/usr/bin/env bash
# Installs what the fuzz targets (fuzz/) need on Debian 12: clang with its runtime libraries
# (libFuzzer, ASan, UBSan) and the libraries the fuzzed modules link. Idempotent: packages
# already present are skipped. scripts/setup.sh installs the rest of the project's needs.
#
# clang 16, not Debian 12's default clang 14: the sources use C++20's lambda captures of
# structured bindings, which clang supports from 16 on. RADIXLM_FUZZ_CLANG picks another
# version (scripts/fuzz.sh uses the same variable).
set -euo pipefail

version="${RADIXLM_FUZZ_CLANG:-16}"
DEB_PACKAGES=(
  "clang-$version" "libclang-rt-$version-dev"  # the compiler; libFuzzer, ASan and UBSan runtimes
  "llvm-$version"                               # llvm-symbolizer: stack traces with file and line
  cmake ninja-build
  nlohmann-json3-dev                            # formats, tokenizer, serve, sim
  libboost-dev                                  # serve: Boost.Beast's HTTP parser (http_request)
  libpcre2-dev libutf8proc-dev                  # tokenizer: pre-tokenizer regex, NFC
  python3                                       # fuzz/make_seeds.py
)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
