#!/usr/bin/env bash
# An editor's side nobody here wrote: the official Agent Client Protocol
# TypeScript SDK (`@agentclientprotocol/sdk`) drives `agy-bridge acp` over
# fake-agy (tests/acp_sdk.rs, tests/acp_sdk/client.mjs). Node 22 comes from
# .ci/pi-env.sh; the SDK from npm into $AGY_BRIDGE_CI_CACHE/acp-sdk
# (default ~/.cache/agy-bridge-ci), reused when that version is there.
# `--install-only`: install, then print (the only thing on stdout) the shell
# lines that put that Node first on PATH and set AGY_BRIDGE_ACP_SDK, for
# `eval` (.ci/run's test step runs tests/acp_sdk.rs, #[ignore]d without it,
# with the rest). Without it: install and run those tests alone.
set -uo pipefail
if [ "${1:-}" = --install-only ]; then exec 3>&1 1>&2; fi
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/.ci/pi-env.sh"
SDK_VERSION=2.4.0
SDK_DIR="$CACHE/acp-sdk"
node22_install || { echo "could not install Node 22"; echo "0 passed, 1 failed"; exit 1; }
if ! grep -q "\"version\": \"$SDK_VERSION\"" "$SDK_DIR/node_modules/@agentclientprotocol/sdk/package.json" 2>/dev/null; then
  echo "installing @agentclientprotocol/sdk@$SDK_VERSION into $SDK_DIR"
  mkdir -p "$SDK_DIR"
  (cd "$SDK_DIR" && { [ -f package.json ] || npm init -y >/dev/null; } &&
    npm install --no-audit --no-fund --loglevel=error "@agentclientprotocol/sdk@$SDK_VERSION") ||
    { echo "could not install the ACP SDK"; echo "0 passed, 1 failed"; exit 1; }
fi
if [ "${1:-}" = --install-only ]; then
  printf 'export PATH=%q AGY_BRIDGE_ACP_SDK=%q\n' "$PATH" "$SDK_DIR" >&3
  exit 0
fi
cd "$ROOT" && cargo build -p fake-agy && AGY_BRIDGE_ACP_SDK="$SDK_DIR" cargo test --test acp_sdk -- --include-ignored --nocapture
