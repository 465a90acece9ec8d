#!/usr/bin/env bash
# End-to-end: the npm packages as a pi user installs them. Packs them
# (scripts/pack-npm.sh: the release build and two tarballs), installs both
# tarballs into an empty directory with npm (local files, offline), and
# starts real pi (0.84.0) on the installed package with no AGY_BRIDGE_BIN and
# no agy-bridge on PATH: the binary can only come from the platform package.
# fake-agy stands in for agy.
#
# Needs target/debug/fake-agy (cargo build --workspace). Node 22 and pi come
# from .ci/pi-env.sh, as in .ci/pi-e2e.sh.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/.ci/pi-env.sh"
pi_env_install || { echo "could not install Node 22 / pi"; echo "0 passed, 1 failed"; exit 1; }

FAKE="$ROOT/target/debug/fake-agy"
[ -x "$FAKE" ] || { echo "build first: cargo build --workspace"; echo "0 passed, 1 failed"; exit 1; }

WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"' EXIT
finish() {
  echo "npm e2e: $passed passed, $failed failed"
  echo "$passed passed, $failed failed"
  [ $failed = 0 ]
  exit
}

# 1. Pack: the host's platform package and the main package, one version.
start=$SECONDS
out="$(bash "$ROOT/scripts/pack-npm.sh" 2>&1)"; code=$?
echo "pack-npm.sh: $((SECONDS - start)) s"
VERSION="$(cargo metadata --no-deps --format-version 1 | node -e 'const m=JSON.parse(require("fs").readFileSync(0,"utf8"));console.log(m.packages.find(p=>p.name==="agy-bridge").version)')"
PLATFORM_PKG="pi-agy-bridge-$(node -p 'process.platform + "-" + process.arch')"
MAIN_TGZ="$ROOT/target/npm/pi-agy-bridge-$VERSION.tgz"
PLATFORM_TGZ="$ROOT/target/npm/$PLATFORM_PKG-$VERSION.tgz"
[ $code = 0 ] && [ -f "$MAIN_TGZ" ] && [ -f "$PLATFORM_TGZ" ]
check "pack-npm.sh packs pi-agy-bridge and $PLATFORM_PKG at $VERSION" $? "exit $code
$(tail -20 <<<"$out")
$(ls "$ROOT/target/npm" 2>&1)"
[ -f "$MAIN_TGZ" ] && [ -f "$PLATFORM_TGZ" ] || finish

# 2. Install both tarballs into an empty directory, offline: npm must need
#    nothing but them. pi's own packages are peers that pi provides to its
#    extensions; --legacy-peer-deps keeps npm from fetching them here.
APP="$WORK/app"
mkdir -p "$APP"
out="$(cd "$APP" && npm init -y >/dev/null &&
  npm install --offline --legacy-peer-deps --no-audit --no-fund --loglevel=error "$MAIN_TGZ" "$PLATFORM_TGZ" 2>&1)"; code=$?
PKG="$APP/node_modules/pi-agy-bridge"
BIN="$APP/node_modules/$PLATFORM_PKG/bin/agy-bridge"
[ $code = 0 ] && [ -f "$PKG/index.ts" ] && [ -x "$BIN" ]
check "npm installs both tarballs offline; the binary is executable" $? "exit $code
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
check "the main package is a pi package pinning its four platform packages to $VERSION" $? "$out"

out="$("$BIN" --version 2>&1)"
[ "$out" = "agy-bridge $VERSION" ]; check "the packaged binary runs and is $VERSION" $? "$out"

# pi as a user runs it: no AGY_BRIDGE_BIN, no agy-bridge on PATH.
unset AGY_BRIDGE_BIN
clean_path=""
IFS=: read -r -a dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [ -n "$d" ] && [ ! -e "$d/agy-bridge" ] && clean_path="${clean_path:+$clean_path:}$d"
done
export PATH="$clean_path"
export HOME="$WORK/home" PI_CODING_AGENT_DIR="$WORK/home/.pi/agent"
mkdir -p "$PI_CODING_AGENT_DIR" "$WORK/project"
export AGY_BIN="$FAKE" FAKE_AGY_SPEED=8 PI_OFFLINE=1
cd "$WORK/project" || exit 1
pi_run() { timeout 180 "$PI" --offline -e "$PKG" "$@" </dev/null; }

# 3. The models come from the packaged binary (`agy-bridge models` over fake agy).
out="$(pi_run --list-models antigravity 2>&1)"; code=$?
grep -q "gemini-3.7-flash" <<<"$out" && grep -q "claude-sonnet-4-6" <<<"$out" && grep -q "gpt-oss-120b-medium" <<<"$out"
check "--list-models antigravity lists agy's models" $? "exit $code
$out"

# 4. A prompt streams the recording's answer.
want="$(sed -n 1p "$ROOT/recordings/hello.jsonl" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.stdout.write(JSON.parse(s).stdout.trim()))')"
out="$(FAKE_AGY_RECORDING=hello pi_run --model antigravity/gemini-3.7-flash --no-session -p "Say hello" 2>&1)"; code=$?
[ $code = 0 ] && [ -n "$want" ] && grep -qF "$want" <<<"$out"
check "pi -p prints agy's answer (hello)" $? "exit $code
$out"

out="$(FAKE_AGY_RECORDING=hello pi_run --model antigravity/gemini-3.7-flash --no-session --mode json -p "Say hello" 2>&1)"; code=$?
order="$(grep -o '"assistantMessageEvent":{"type":"text_[a-z]*"' <<<"$out" | sed 's/.*"type":"//; s/"$//' | uniq | tr '\n' ' ')"
[ $code = 0 ] && [ "$order" = "text_start text_delta text_end " ]
check "--mode json streams the answer as text deltas" $? "exit $code, text events: $order
$(tail -5 <<<"$out")"

# 5. Without the platform package, pi says which package is missing and how
#    to build from source.
rm -rf "$APP/node_modules/$PLATFORM_PKG"
out="$(pi_run --list-models antigravity 2>&1)"
grep -qF "$PLATFORM_PKG" <<<"$out" && grep -qF "cargo install --path ." <<<"$out"
check "without $PLATFORM_PKG pi names it and the build from source" $? "$out"

finish
