#!/usr/bin/env bash
# End-to-end: the npm packages as a pi user installs them, in real pi
# ($PI_VERSION, one of .ci/pi-versions; default the newest),
# with no AGY_BRIDGE_BIN and no agy-bridge on PATH; fake-agy stands in for agy.
#
# 1-4. README's route for a local build, as written: `scripts/pack-npm.sh`
#      (the release build, one tarball with the binary inside), then the
#      `pi install npm:pi-agy-bridge@file:...` line it prints, run as printed
#      (npm offline: it may need nothing but the tarball). Then plain pi, with
#      no -e, lists the antigravity models and a prompt streams agy's answer.
# 5.   The release layout (`pi install npm:pi-agy-bridge` from the registry):
#      `scripts/pack-npm.sh <host>=<binary>` packs the main package and this
#      platform's package; npm installs both offline; pi finds the binary in
#      the platform package.
# 6.   The main package without its platform package (npm skips an optional
#      dependency it cannot fetch: what a `pi install` of the main tarball
#      alone gets): pi says which package is missing and how to fix it, on
#      stderr and in pi's UI (RPC mode's notify), not silence.
#
# Needs <target>/debug/fake-agy (cargo build --workspace); the target
# directory is cargo's (CARGO_TARGET_DIR is honoured). Node 22 and pi come
# from .ci/pi-env.sh, as in .ci/pi-e2e.sh.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/.ci/pi-env.sh"
pi_env_install || { echo "could not install Node 22 / pi"; echo "0 passed, 1 failed"; exit 1; }
cd "$ROOT" || exit 1

meta="$(cargo metadata --no-deps --format-version 1)"
VERSION="$(node -e 'const m=JSON.parse(require("fs").readFileSync(0,"utf8"));console.log(m.packages.find(p=>p.name==="agy-bridge").version)' <<<"$meta")"
TARGET_DIR="$(node -e 'console.log(JSON.parse(require("fs").readFileSync(0,"utf8")).target_directory)' <<<"$meta")"
HOST="$(node -p 'process.platform + "-" + process.arch')"
PLATFORM_PKG="pi-agy-bridge-$HOST"
FAKE="$TARGET_DIR/debug/fake-agy"
[ -x "$FAKE" ] || { echo "build first: cargo build --workspace"; echo "0 passed, 1 failed"; exit 1; }

WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"' EXIT
finish() {
  echo "npm e2e: $passed passed, $failed failed"
  echo "$passed passed, $failed failed"
  [ $failed = 0 ]
  exit
}

# pi as a user runs it: `pi` on PATH, no AGY_BRIDGE_BIN, no agy-bridge on
# PATH, a fresh HOME. Each part gets its own pi agent directory (installed
# packages and settings).
# Packing (cargo, rustup) runs in the caller's own environment.
own() { env HOME="$OWN_HOME" PATH="$OWN_PATH" "$@"; }
OWN_HOME="$HOME" OWN_PATH="$PATH"
unset AGY_BRIDGE_BIN
clean_path="$(dirname "$PI")"
IFS=: read -r -a dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [ -n "$d" ] && [ ! -e "$d/agy-bridge" ] && clean_path="$clean_path:$d"
done
export PATH="$clean_path"
export HOME="$WORK/home"
export AGY_BIN="$FAKE" FAKE_AGY_SPEED=8 PI_OFFLINE=1
mkdir -p "$HOME" "$WORK/project"
agent() { export PI_CODING_AGENT_DIR="$WORK/agent-$1"; mkdir -p "$PI_CODING_AGENT_DIR"; }
pi_run() { (cd "$WORK/project" && timeout 180 pi --offline "$@" </dev/null); }
lists_models() { grep -q "gemini-3.7-flash" <<<"$1" && grep -q "claude-sonnet-4-6" <<<"$1" && grep -q "gpt-oss-120b-medium" <<<"$1"; }

# 1. README: `scripts/pack-npm.sh` packs one tarball, the binary inside, and
#    prints the line that installs it.
start=$SECONDS
out="$(own bash scripts/pack-npm.sh 2>&1)"; code=$?
echo "pack-npm.sh: $((SECONDS - start)) s"
TGZ="$TARGET_DIR/npm/pi-agy-bridge-$VERSION.tgz"
INSTALL="pi install npm:pi-agy-bridge@file:$TGZ"
printed="$(sed -n 's/^  pi install /pi install /p' <<<"$out")"
[ $code = 0 ] && [ -f "$TGZ" ] && [ "$printed" = "$INSTALL" ]
check "pack-npm.sh packs $TGZ and prints: $INSTALL" $? "exit $code, printed: $printed
$(tail -20 <<<"$out")
$(ls "$TARGET_DIR/npm" 2>&1)"
[ -f "$TGZ" ] && [ -n "$printed" ] || finish
# README shows the same two lines (for the default target directory).
readme_line="pi install npm:pi-agy-bridge@file:\$PWD/target/npm/pi-agy-bridge-$VERSION.tgz"
grep -q '^scripts/pack-npm.sh ' README.md && grep -qF "$readme_line" README.md
check "README's pi set-up shows scripts/pack-npm.sh and $readme_line" $? "$(grep -n 'pack-npm.sh\|pi install' README.md)"

out="$(tar -tvzf "$TGZ" 2>&1)"
grep -qE '^-rwxr-xr-x .* package/bin/agy-bridge$' <<<"$out" && grep -q ' package/index.ts$' <<<"$out"
check "the tarball holds index.ts and an executable bin/agy-bridge" $? "$out"
out="$(tar -xOzf "$TGZ" package/package.json 2>&1)"
node -e '
  const pkg = JSON.parse(process.argv[1]);
  process.exit(pkg.name === "pi-agy-bridge" && pkg.version === process.argv[2] && pkg.keywords.includes("pi-package") &&
    pkg.pi.extensions.includes("./index.ts") && !pkg.optionalDependencies && !pkg.dependencies ? 0 : 1);
' "$out" "$VERSION"
check "its manifest is pi-agy-bridge $VERSION, a pi package with no dependencies to fetch" $? "$out"

# 2. The printed line, run as printed; npm offline: nothing but the tarball.
agent local
out="$(cd "$WORK/project" && npm_config_offline=true timeout 300 bash -c "$printed" 2>&1)"; code=$?
[ $code = 0 ] && grep -q "^Installed npm:pi-agy-bridge@file:$TGZ" <<<"$out" &&
  [ -x "$PI_CODING_AGENT_DIR/npm/node_modules/pi-agy-bridge/bin/agy-bridge" ]
check "\`$printed\` installs it (offline)" $? "exit $code
$out
$(ls -lR "$PI_CODING_AGENT_DIR/npm/node_modules" 2>&1 | head -20)"

out="$("$PI_CODING_AGENT_DIR/npm/node_modules/pi-agy-bridge/bin/agy-bridge" --version 2>&1)"
[ "$out" = "agy-bridge $VERSION" ]; check "the installed binary runs and is $VERSION" $? "$out"

# 3. Plain pi (the package comes from pi's settings) lists agy's models,
#    from the bundled binary (`agy-bridge models` over fake agy).
out="$(pi_run --list-models antigravity 2>&1)"; code=$?
lists_models "$out"
check "pi --list-models antigravity lists agy's models" $? "exit $code
$out"

# 4. A prompt streams the recording's answer.
want="$(sed -n 1p recordings/hello.jsonl | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.stdout.write(JSON.parse(s).stdout.trim()))')"
out="$(FAKE_AGY_RECORDING=hello pi_run --model antigravity/gemini-3.7-flash --no-session -p "Say hello" 2>&1)"; code=$?
[ $code = 0 ] && [ -n "$want" ] && grep -qF "$want" <<<"$out"
check "pi -p prints agy's answer (hello)" $? "exit $code
$out"

out="$(FAKE_AGY_RECORDING=hello pi_run --model antigravity/gemini-3.7-flash --no-session --mode json -p "Say hello" 2>&1)"; code=$?
order="$(grep -o '"assistantMessageEvent":{"type":"text_[a-z]*"' <<<"$out" | sed 's/.*"type":"//; s/"$//' | uniq | tr '\n' ' ')"
[ $code = 0 ] && [ "$order" = "text_start text_delta text_end " ]
check "--mode json streams the answer as text deltas" $? "exit $code, text events: $order
$(tail -5 <<<"$out")"

# The installed package is a copy: it outlives the tarball (a cargo clean).
rm -f "$TGZ"
out="$(pi_run --list-models antigravity 2>&1)"
lists_models "$out"
check "with the tarball gone pi still lists the models" $? "$out"

# 5. The release layout: the main package and this platform's package.
out="$(own bash scripts/pack-npm.sh "$HOST=$TARGET_DIR/release/agy-bridge" 2>&1)"; code=$?
MAIN_TGZ="$TARGET_DIR/npm/pi-agy-bridge-$VERSION.tgz"
PLATFORM_TGZ="$TARGET_DIR/npm/$PLATFORM_PKG-$VERSION.tgz"
[ $code = 0 ] && [ -f "$MAIN_TGZ" ] && [ -f "$PLATFORM_TGZ" ]
check "pack-npm.sh $HOST=... packs pi-agy-bridge and $PLATFORM_PKG at $VERSION" $? "exit $code
$(tail -20 <<<"$out")"
[ -f "$MAIN_TGZ" ] && [ -f "$PLATFORM_TGZ" ] || finish

# pi's own packages are peers that pi provides to its extensions;
# --legacy-peer-deps keeps npm from fetching them here (pi does the same).
APP="$WORK/app"
mkdir -p "$APP"
out="$(cd "$APP" && npm init -y >/dev/null &&
  npm install --offline --legacy-peer-deps --no-audit --no-fund --loglevel=error "$MAIN_TGZ" "$PLATFORM_TGZ" 2>&1)"; code=$?
PKG="$APP/node_modules/pi-agy-bridge"
BIN="$APP/node_modules/$PLATFORM_PKG/bin/agy-bridge"
[ $code = 0 ] && [ -f "$PKG/index.ts" ] && [ -x "$BIN" ] && [ ! -e "$PKG/bin" ]
check "npm installs both release tarballs offline; the binary is executable and only in $PLATFORM_PKG" $? "exit $code
$out
$(ls -lR "$APP/node_modules" 2>&1 | head -30)"

out="$(node -e '
  const pkg = require(process.argv[1]);
  const want = process.argv[2];
  const opt = pkg.optionalDependencies || {};
  const ok = pkg.version === want && pkg.keywords.includes("pi-package") &&
    pkg.pi.extensions.includes("./index.ts") && Object.keys(opt).length === 4 &&
    Object.values(opt).every((v) => v === want) && opt[process.argv[3]] === want;
  console.log(JSON.stringify({ version: pkg.version, keywords: pkg.keywords, pi: pkg.pi, optionalDependencies: opt }));
  process.exit(ok ? 0 : 1);
' "$PKG/package.json" "$VERSION" "$PLATFORM_PKG" 2>&1)"
check "the release main package pins its four platform packages to $VERSION" $? "$out"

agent release
out="$(pi_run -e "$PKG" --list-models antigravity 2>&1)"; code=$?
lists_models "$out"
check "from the release layout pi lists agy's models (binary from $PLATFORM_PKG)" $? "exit $code
$out"

# 6. The main package alone, installed into pi: npm (offline) skips the
#    platform package it cannot fetch, as it skips one the registry lacks.
agent missing
out="$(cd "$WORK/project" && npm_config_offline=true timeout 300 pi install "npm:pi-agy-bridge@file:$MAIN_TGZ" 2>&1)"; code=$?
[ $code = 0 ] && [ -f "$PI_CODING_AGENT_DIR/npm/node_modules/pi-agy-bridge/index.ts" ] &&
  [ ! -e "$PI_CODING_AGENT_DIR/npm/node_modules/$PLATFORM_PKG" ]
check "pi install of the main tarball alone: installed, $PLATFORM_PKG skipped" $? "exit $code
$out
$(ls "$PI_CODING_AGENT_DIR/npm/node_modules" 2>&1)"

out="$(pi_run --list-models antigravity 2>&1)"
grep -qF "no agy-bridge binary" <<<"$out" && grep -qF "$PLATFORM_PKG" <<<"$out" && grep -qF "scripts/pack-npm.sh" <<<"$out"
check "without a binary, pi --list-models says which package is missing and how to fix it" $? "$out"

# In pi's UI: RPC mode, on another provider's model (a key pi never uses
# offline), as a user with other providers starts pi.
out="$(ANTHROPIC_API_KEY=unused node .ci/pi-missing-rpc.mjs "$PI" "$WORK/project" "no agy-bridge binary" "$PLATFORM_PKG" "scripts/pack-npm.sh" 2>&1)"
while IFS= read -r line; do
  case "$line" in
    "ok   - "*) check "${line#ok   - }" 0 "" ;;
    "FAIL - "*) check "${line#FAIL - }" 1 "$out" ;;
  esac
done <<<"$out"
grep -q '^\(ok  \|FAIL\) - ' <<<"$out" || check "pi-missing-rpc.mjs ran" 1 "$out"

finish
