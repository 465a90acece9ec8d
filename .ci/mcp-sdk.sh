#!/usr/bin/env bash
# Conformance with a client nobody here wrote: the official MCP TypeScript
# SDK runs initialize, tools/list and tools/call against a live bridge MCP
# server (tests/mcp_sdk.rs, tests/mcp_sdk/client.mjs). Node 22 comes from
# .ci/pi-env.sh; the SDK from npm into $AGY_BRIDGE_CI_CACHE/mcp-sdk
# (default ~/.cache/agy-bridge-ci), reused when that version is there.
# `--install-only`: install, then print (the only thing on stdout) the shell
# lines that put that Node first on PATH and set AGY_BRIDGE_MCP_SDK, for
# `eval` (.ci/run's test step runs tests/mcp_sdk.rs, #[ignore]d without it,
# with the rest). Without it: install and run those tests alone.
set -uo pipefail
if [ "${1:-}" = --install-only ]; then exec 3>&1 1>&2; fi
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/.ci/pi-env.sh"
SDK_VERSION=1.32.2
SDK_DIR="$CACHE/mcp-sdk"
pi_env_install || { echo "could not install Node 22"; echo "0 passed, 1 failed"; exit 1; }
if ! grep -q "\"version\": \"$SDK_VERSION\"" "$SDK_DIR/node_modules/@modelcontextprotocol/sdk/package.json" 2>/dev/null; then
  echo "installing @modelcontextprotocol/sdk@$SDK_VERSION into $SDK_DIR"
  mkdir -p "$SDK_DIR"
  (cd "$SDK_DIR" && { [ -f package.json ] || npm init -y >/dev/null; } &&
    npm install --no-audit --no-fund --loglevel=error "@modelcontextprotocol/sdk@$SDK_VERSION") ||
    { echo "could not install the MCP SDK"; echo "0 passed, 1 failed"; exit 1; }
fi
if [ "${1:-}" = --install-only ]; then
  printf 'export PATH=%q AGY_BRIDGE_MCP_SDK=%q\n' "$PATH" "$SDK_DIR" >&3
  exit 0
fi
cd "$ROOT" && AGY_BRIDGE_MCP_SDK="$SDK_DIR" cargo test --test mcp_sdk -- --include-ignored --nocapture
