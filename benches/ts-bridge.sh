#!/usr/bin/env bash
# CPU of one 50 MB answer (benches/memory.rs's recording: 10 commits, each
# rewriting the whole step) through the TypeScript bridge and through ours,
# interleaved, on fake-agy at real timing. Manual: it needs a checkout of
# EstebanForge/pi-antigravity-bridge (not on npm) in TS_BRIDGE_DIR; Node 22
# (for node:sqlite) and tsx come from the npm registry, as CI's pi tests do.
#
#   TS_BRIDGE_DIR=~/src/pi-antigravity-bridge benches/ts-bridge.sh [ROUNDS]
#
# Theirs: `runAgyTurn` in one node process (benches/ts-bridge/harness.ts),
# node's start-up and module loading left out. Ours: `agy-bridge stream`
# with pi's request, its whole process tree (start-up, the guardian, the
# JSON lines to pi) less what fake-agy reports it spent, as benches/memory.rs
# counts it. MEMORY_BENCH_MB (default 50) sets the answer's size;
# AGY_BRIDGE_BIN measures another build of ours.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
: "${TS_BRIDGE_DIR:?set TS_BRIDGE_DIR to a checkout of EstebanForge/pi-antigravity-bridge}"
ROUNDS="${1:-3}"
. "$ROOT/.ci/pi-env.sh"
node22_install
TS_WORK="$CACHE/ts-bridge"
mkdir -p "$TS_WORK"
if [ ! -d "$TS_WORK/node_modules/tsx" ]; then
  (cd "$TS_WORK" && { [ -f package.json ] || npm init -y >/dev/null; } &&
    npm install --no-audit --no-fund --loglevel=error tsx@4 @modelcontextprotocol/sdk@1)
fi
# The bridge's sources are ES modules (its package.json says so; ours here
# must too, or tsx compiles them to CommonJS).
(cd "$TS_WORK" && npm pkg set type=module)
rm -rf "$TS_WORK/src" && cp -r "$TS_BRIDGE_DIR/src" "$TS_WORK/src"
cp "$ROOT/benches/ts-bridge/harness.ts" "$TS_WORK/harness.ts"

cargo build --release -q -p agy-bridge -p fake-agy --manifest-path "$ROOT/Cargo.toml"
FAKE="$ROOT/target/release/fake-agy"
BRIDGE="${AGY_BRIDGE_BIN:-$ROOT/target/release/agy-bridge}"
WORK="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$WORK"' EXIT
REC="$WORK/answer.jsonl"
# The memory bench writes the recording (and measures ours once on it).
MEMORY_BENCH_SAVE="$REC" cargo bench -q --bench memory --manifest-path "$ROOT/Cargo.toml" >/dev/null

# fake-agy's own CPU in a home: each pid's last report, summed, in ms.
fake_ms() {
  node -e 'const last = {};
    for (const l of require("fs").readFileSync(process.argv[1], "utf8").split("\n"))
      if (l) { const v = JSON.parse(l); last[v.pid] = v.cpu_us; }
    console.log(Math.round(Object.values(last).reduce((a, b) => a + b, 0) / 1000));' "$1"
}

# A fresh home with fake-agy replaying the answer; prints its path.
new_home() {
  local h; h="$(mktemp -d "$WORK/home.XXXXXX")"; mkdir -p "$h/work"; echo "$h"
}

fake_env() { # fake_env HOME: the environment both bridges run agy in
  echo HOME="$1" AGY_BIN="$FAKE" FAKE_AGY_RECORDING="$REC" FAKE_AGY_SPEED=1 \
    FAKE_AGY_CPU_LOG="$1/fake-agy-cpu.log"
}

theirs() {
  local h; h="$(new_home)"
  (cd "$TS_WORK" && env -u AGY_CONVERSATIONS_DIR -u AGY_EXTRA_ARGS $(fake_env "$h") \
    node --disable-warning=ExperimentalWarning --import tsx harness.ts "$h/work") |
    node -e 'const v = JSON.parse(require("fs").readFileSync(0, "utf8"));
      console.log(`theirs: ${v.cpu_ms} ms, ${v.text_bytes} answer bytes, exit ${v.exit_code}`)'
}

ours() {
  local h; h="$(new_home)"
  local request="{\"model\":\"gemini-3.7-flash\",\"sessionId\":\"ts-bridge-bench\",\"cwd\":\"$h/work\",\"messages\":[{\"role\":\"user\",\"content\":\"go\"}]}"
  # pi's request, then stdin held open to the end of the turn, as pi does.
  mkfifo "$h/stdin"
  { echo "$request"; exec sleep 3600; } >"$h/stdin" &
  local holder=$!
  # `times` in the subshell: the CPU of the children it waited for (the
  # bridge, and what the bridge reaped: the guardian, fake-agy).
  (env -u AGY_CONVERSATIONS_DIR -u AGY_EXTRA_ARGS -u AGY_BRIDGE_STATE_DIR $(fake_env "$h") \
    "$BRIDGE" stream <"$h/stdin" >"$h/out" 2>/dev/null || true; times >"$h/times")
  kill "$holder" 2>/dev/null || true
  local tree fake
  tree="$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/);
    printf "%d", (u[1] * 60 + u[2] + s[1] * 60 + s[2]) * 1000 }' "$h/times")"
  fake="$(fake_ms "$h/fake-agy-cpu.log")"
  node -e 'let n = 0;
    for (const l of require("fs").readFileSync(process.argv[1], "utf8").split("\n")) {
      try { const v = JSON.parse(l); if (v.type === "text_delta") n += Buffer.byteLength(v.delta); } catch {}
    }
    console.log(`ours:   ${process.argv[2] - process.argv[3]} ms, ${n} answer bytes`)' "$h/out" "$tree" "$fake"
}

for ((i = 1; i <= ROUNDS; i++)); do
  theirs
  ours
done
