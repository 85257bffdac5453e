#!/bin/bash
# Installs the four agent CLIs tests/agent_clients_test.py drives against `radixlm serve`
# (issue 46), from the npm registry, into third_party_data/agent-clients (git ignores
# third_party_data). Optional: ~1.1 GB; the test reports SKIPPED without them. Their platform
# binaries come from the registry as optionalDependencies; nothing else is fetched.
#   Claude Code  @anthropic-ai/claude-code  (Anthropic Messages API)
#   Codex CLI    @openai/codex              (OpenAI Responses API)
#   Qwen Code    @qwen-code/qwen-code       (chat completions)
#   opencode     opencode-ai                (chat completions, @ai-sdk/openai-compatible)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/third_party_data/agent-clients"
CLIENTS=("@anthropic-ai/claude-code@2.1.197" "@openai/codex@0.171.0" "@qwen-code/qwen-code@0.15.10" "opencode-ai@1.18.33")
command -v npm >/dev/null || { echo "setup_agent_clients: npm is needed (scripts/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$dest"
cd "$dest"
[ -f package.json ] || echo '{"name": "radixlm-agent-clients", "private": true}' > package.json
npm install --no-audit --no-fund --save-exact "${CLIENTS[@]}"
for b in claude codex qwen opencode; do
  [ -x "node_modules/.bin/$b" ] || { echo "setup_agent_clients: $b is missing after the install" >&2; exit 1; }
done
echo "agent clients in $dest/node_modules/.bin"
