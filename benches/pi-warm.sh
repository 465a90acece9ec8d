#!/usr/bin/env bash
# Runs benches/pi_warm.mjs: real pi (RPC) with the extension over release
# binaries, warm agy sessions against AGY_WARM=off, side by side. Installs
# Node 22 and pi as CI does (.ci/pi-env.sh). ROUNDS (default 5) sessions each;
# FAKE_AGY_BOOT_MS (default 2400) is fake-agy's start-up.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/.ci/pi-env.sh"
pi_env_install
cargo build --release --workspace --manifest-path "$ROOT/Cargo.toml"
export AGY_BRIDGE_BIN="$ROOT/target/release/agy-bridge"
node "$ROOT/benches/pi_warm.mjs" "$PI" "$ROOT/pi-extension" "$ROOT/target/release/fake-agy" \
  "$ROOT/recordings/stdin-two-turns.jsonl" "${ROUNDS:-5}"
