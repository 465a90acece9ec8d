#!/usr/bin/env bash
# Runs benches/pi_warm.mjs: real pi (RPC) with the extension over release
# binaries, warm agy sessions against AGY_WARM=off, side by side. Installs
# Node 22 and pi as CI does (.ci/pi-env.sh). ROUNDS (default 5) sessions each;
# FAKE_AGY_BOOT_MS (default 2400) is fake-agy's start-up. BEFORE_REF=<git
# ref> also runs that commit's extension (e.g. the one before warm sessions,
# e175995) over the same binaries, to compare the cold path with it.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/.ci/pi-env.sh"
pi_env_install
cargo build --release --workspace --manifest-path "$ROOT/Cargo.toml"
export AGY_BRIDGE_BIN="$ROOT/target/release/agy-bridge"
before=()
if [ -n "${BEFORE_REF:-}" ]; then
  dir="$(mktemp -d)"; trap 'rm -rf "$dir"' EXIT
  git -C "$ROOT" show "$BEFORE_REF:pi-extension/index.ts" > "$dir/index.ts"
  git -C "$ROOT" show "$BEFORE_REF:pi-extension/package.json" > "$dir/package.json"
  before=("$dir")
fi
node "$ROOT/benches/pi_warm.mjs" "$PI" "$ROOT/pi-extension" "$ROOT/target/release/fake-agy" \
  "$ROOT/recordings/stdin-two-turns.jsonl" "${ROUNDS:-5}" "${before[@]}"
