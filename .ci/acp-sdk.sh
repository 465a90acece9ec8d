#!/usr/bin/env bash
# An editor's side nobody here wrote: the official Agent Client Protocol
# TypeScript SDK (`@agentclientprotocol/sdk`) drives `agy-bridge acp` over
# fake-agy (tests/acp_sdk.rs, tests/acp_sdk/client.mjs), installed into
# $AGY_BRIDGE_CI_CACHE/acp-sdk (default ~/.cache/agy-bridge-ci).
# `--install-only`: install, then print the lines setting AGY_BRIDGE_ACP_SDK
# for `eval`; without it: install and run those tests alone (.ci/npm-sdk.sh).
SDK_ARG=${1:-}
. "$(dirname "$0")/npm-sdk.sh"
npm_sdk @agentclientprotocol/sdk 2.4.0 "$CACHE/acp-sdk" AGY_BRIDGE_ACP_SDK acp_sdk "build -p fake-agy"
