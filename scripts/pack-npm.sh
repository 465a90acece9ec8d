#!/usr/bin/env bash
# Packs the npm packages that `pi install npm:pi-agy-bridge` installs, in the
# pattern esbuild and biome use: one package per platform holding the
# agy-bridge binary (`pi-agy-bridge-<os>-<cpu>`, with `os`/`cpu` fields so npm
# installs only the matching one), and the main package `pi-agy-bridge` (the
# pi extension from pi-extension/) with all of them as optionalDependencies.
# Every package gets the version of Cargo.toml; the main package pins its
# platform packages to it.
#
#   scripts/pack-npm.sh
#       builds the release binary for this machine (cargo build --release)
#       and packs this platform's package and the main package.
#   scripts/pack-npm.sh PLATFORM=BINARY...
#       packs prebuilt binaries instead (the release workflow), e.g.
#       linux-x64=dist/agy-bridge; no build.
#
# Writes the tarballs, and nothing else, to target/npm/ and prints their paths.
# Needs cargo, node and npm.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
PLATFORMS="linux-x64 linux-arm64 darwin-arm64 darwin-x64"

meta="$(cargo metadata --no-deps --format-version 1)"
VERSION="$(node -e 'const m=JSON.parse(require("fs").readFileSync(0,"utf8"));console.log(m.packages.find(p=>p.name==="agy-bridge").version)' <<<"$meta")"
TARGET_DIR="$(node -e 'console.log(JSON.parse(require("fs").readFileSync(0,"utf8")).target_directory)' <<<"$meta")"
OUT="$TARGET_DIR/npm"

if [ $# = 0 ]; then
  host="$(node -p 'process.platform + "-" + process.arch')"
  case " $PLATFORMS " in
    *" $host "*) ;;
    *) echo "pack-npm: no npm package for this platform ($host); platforms: $PLATFORMS" >&2; exit 1 ;;
  esac
  cargo build --release -p agy-bridge --bin agy-bridge
  set -- "$host=$TARGET_DIR/release/agy-bridge"
fi

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
rm -rf "$OUT"
mkdir -p "$OUT"

pack() { # pack DIR: npm pack into $OUT, print the tarball's path
  local name
  name="$(cd "$1" && npm pack --silent --pack-destination "$OUT")"
  echo "$OUT/$name"
}

# One package per binary.
for spec in "$@"; do
  platform="${spec%%=*}"
  bin="${spec#*=}"
  case " $PLATFORMS " in
    *" $platform "*) ;;
    *) echo "pack-npm: unknown platform '$platform' (want one of: $PLATFORMS)" >&2; exit 1 ;;
  esac
  [ -f "$bin" ] || { echo "pack-npm: no binary at $bin" >&2; exit 1; }
  dir="$STAGE/$platform"
  mkdir -p "$dir/bin"
  # Artifact downloads drop the mode; the binary must be executable (the
  # extension spawns it, and it re-executes itself as agy's guardian).
  install -m 0755 "$bin" "$dir/bin/agy-bridge"
  PLATFORM="$platform" VERSION="$VERSION" node -e '
    const [os, cpu] = process.env.PLATFORM.split("-");
    const osName = { linux: "Linux", darwin: "macOS" }[os];
    const pkg = {
      name: `pi-agy-bridge-${process.env.PLATFORM}`,
      version: process.env.VERSION,
      description: `The agy-bridge binary for ${osName} ${cpu}, used by the pi package pi-agy-bridge.`,
      license: "MIT OR Apache-2.0",
      os: [os],
      cpu: [cpu],
      files: ["bin/agy-bridge"],
      preferUnplugged: true,
    };
    require("fs").writeFileSync(process.argv[1], JSON.stringify(pkg, null, 2) + "\n");
  ' "$dir/package.json"
  printf '# pi-agy-bridge-%s\n\nThe `agy-bridge` binary for %s, installed by [pi-agy-bridge](https://www.npmjs.com/package/pi-agy-bridge) as an optional dependency. Not used on its own.\n' \
    "$platform" "$platform" >"$dir/README.md"
  pack "$dir"
done

# The main package: the extension, its manifest with the version and the
# pinned platform packages added.
dir="$STAGE/main"
mkdir -p "$dir"
cp pi-extension/index.ts npm/README.md "$dir/"
PLATFORMS="$PLATFORMS" VERSION="$VERSION" node -e '
  const fs = require("fs");
  const pkg = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  pkg.version = process.env.VERSION;
  pkg.files = ["index.ts", "README.md"];
  pkg.optionalDependencies = Object.fromEntries(
    process.env.PLATFORMS.split(" ").map((p) => [`pi-agy-bridge-${p}`, process.env.VERSION]));
  fs.writeFileSync(process.argv[2], JSON.stringify(pkg, null, 2) + "\n");
' pi-extension/package.json "$dir/package.json"
pack "$dir"
