#!/usr/bin/env bash
# For a maintainer: is there a pi on npm newer than the newest one the
# extension is tested on (.ci/pi-versions)? Asks npm for the latest
# @earendil-works/pi-coding-agent. Exit 0 when the tested one is the
# latest; 1 when npm has a newer one (then: read its CHANGELOG.md for
# extension and provider changes, set `newest` in .ci/pi-versions, and run
# .ci/run); 2 when npm could not be asked.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
tested="$(awk '$1 == "newest" { print $2 }' "$ROOT/.ci/pi-versions")"
latest="$(npm view @earendil-works/pi-coding-agent version 2>/dev/null)" || latest=""
if [ -z "$latest" ]; then
  echo "could not ask npm for the latest pi (tested up to pi $tested)"
  exit 2
fi
if [ "$latest" = "$tested" ]; then
  echo "pi $latest is the latest on npm, and the newest tested (.ci/pi-versions)"
  exit 0
fi
newer="$(printf '%s\n%s\n' "$tested" "$latest" | sort -V | tail -1)"
if [ "$newer" = "$tested" ]; then
  echo "npm's latest pi is $latest, older than the newest tested ($tested)"
  exit 0
fi
echo "pi $latest is on npm; the extension is tested up to pi $tested."
echo "Read its CHANGELOG.md (extensions, custom providers), set 'newest $latest' in .ci/pi-versions and run .ci/run."
exit 1
