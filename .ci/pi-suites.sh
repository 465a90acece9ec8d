#!/usr/bin/env bash
# The whole pi suite on each pi version .ci/pi-versions names (the newest
# and the floor): the extension inside a real pi (.ci/pi-e2e.sh: print,
# JSON, RPC and SDK modes, every .ci/pi-*.mjs scenario, the extension's own
# checks) and the npm packages as a pi user installs them (.ci/npm-e2e.sh,
# with the missing-binary scenario). One build serves every version: the
# debug binaries cargo built, and the release build the first npm run makes
# (the next one's `cargo build --release` has nothing to do). Each pi is
# installed once into the CI cache (.ci/pi-env.sh).
#
# First: the floor is what pi-extension/package.json and README claim.
# Prints how long each version's run took, and "N passed, M failed" over all.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/.ci/pi-env.sh"
node22_install || { echo "could not install Node 22"; echo "0 passed, 1 failed"; exit 1; }

out="$(node -e '
  const pkg = require(process.argv[1]);
  const want = ">=" + process.argv[2];
  const peers = pkg.peerDependencies || {};
  const bad = ["@earendil-works/pi-ai", "@earendil-works/pi-coding-agent"].filter((p) => peers[p] !== want);
  console.log(bad.length ? `peerDependencies ${JSON.stringify(peers)}: want ${want} for ${bad.join(", ")}` : "ok");
  process.exit(bad.length ? 1 : 0);
' "$ROOT/pi-extension/package.json" "$PI_FLOOR" 2>&1)"
check "pi-extension/package.json claims pi >=$PI_FLOOR, the floor .ci/pi-versions tests" $? "$out"
grep -qF "pi $PI_FLOOR to $PI_NEWEST" "$ROOT/README.md"
check "README's pi set-up states the tested range (pi $PI_FLOOR to $PI_NEWEST)" $? "$(grep -n 'pi [0-9.]* to [0-9.]*' "$ROOT/README.md")"

summary=""
for which in newest floor; do
  version="$(pi_version "$which")"
  for suite in pi-e2e npm-e2e; do
    start=$SECONDS
    log="$(mktemp)"
    PI_VERSION="$version" bash "$ROOT/.ci/$suite.sh" 2>&1 | tee "$log"
    counts="$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)"
    rm -f "$log"
    p="${counts%% passed*}"; f="${counts#*passed, }"; f="${f%% failed*}"
    if [ -z "$counts" ]; then p=0; f=1; fi
    passed=$((passed + p)); failed=$((failed + f))
    summary="$summary
  pi $version ($which), $suite: $p passed, $f failed, $((SECONDS - start)) s"
  done
done
echo "pi suites:$summary"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
