# Sourced by .ci/mcp-sdk.sh and .ci/acp-sdk.sh: an official TypeScript SDK
# from npm for the tests that drive the bridge with a client nobody here
# wrote. `npm_sdk PACKAGE VERSION DIR VAR TEST [PREP]` installs Node 22
# (.ci/pi-env.sh) and PACKAGE@VERSION into DIR (reused when that version is
# there). With `--install-only` as the script's first argument it then
# prints, as the only thing on stdout, the shell lines that put that Node
# first on PATH and set VAR=DIR, for `eval` (.ci/run's test step runs the
# #[ignore]d tests with the rest); without it, it runs `cargo test --test
# TEST` alone (after `cargo PREP`, when given).
set -uo pipefail
if [ "${SDK_ARG:-}" = --install-only ]; then exec 3>&1 1>&2; fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/.ci/pi-env.sh"

npm_sdk() {
  local package=$1 version=$2 dir=$3 var=$4 test=$5 prep=${6:-}
  node22_install || { echo "could not install Node 22"; echo "0 passed, 1 failed"; exit 1; }
  if ! grep -q "\"version\": \"$version\"" "$dir/node_modules/$package/package.json" 2>/dev/null; then
    echo "installing $package@$version into $dir"
    mkdir -p "$dir"
    (cd "$dir" && { [ -f package.json ] || npm init -y >/dev/null; } &&
      npm install --no-audit --no-fund --loglevel=error "$package@$version") ||
      { echo "could not install $package"; echo "0 passed, 1 failed"; exit 1; }
  fi
  if [ "${SDK_ARG:-}" = --install-only ]; then
    printf 'export PATH=%q %s=%q\n' "$PATH" "$var" "$dir" >&3
    exit 0
  fi
  cd "$ROOT" || exit 1
  if [ -n "$prep" ]; then cargo $prep || exit 1; fi
  env "$var=$dir" cargo test --test "$test" -- --include-ignored --nocapture
}
