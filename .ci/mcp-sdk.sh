#!/usr/bin/env bash
# Conformance with a client nobody here wrote: the official MCP TypeScript
# SDK runs initialize, tools/list and tools/call against a live bridge MCP
# server (tests/mcp_sdk.rs, tests/mcp_sdk/client.mjs), installed into
# $AGY_BRIDGE_CI_CACHE/mcp-sdk (default ~/.cache/agy-bridge-ci).
# `--install-only`: install, then print the lines setting AGY_BRIDGE_MCP_SDK
# for `eval`; without it: install and run those tests alone (.ci/npm-sdk.sh).
SDK_ARG=${1:-}
. "$(dirname "$0")/npm-sdk.sh"
npm_sdk @modelcontextprotocol/sdk 1.32.2 "$CACHE/mcp-sdk" AGY_BRIDGE_MCP_SDK mcp_sdk
