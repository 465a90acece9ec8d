#!/usr/bin/env bash
# Packs the npm packages of the pi extension.
#
#   scripts/pack-npm.sh
#       A local build: builds the release binary for this machine (cargo
#       build --release) and packs ONE package, pi-agy-bridge with the binary
#       inside (bin/agy-bridge) and no optional dependencies, so npm fetches
#       nothing. Prints its path and the command that installs it into pi:
#         pi install npm:pi-agy-bridge@file:/abs/path/pi-agy-bridge-<v>.tgz
#       (pi finds an npm package by the name before `@`; `npm:/abs/path.tgz`
#       installs but pi 0.84 never loads it.) README's "pi set-up" documents
#       this route and .ci/npm-e2e.sh tests it as written.
#   scripts/pack-npm.sh PLATFORM=BINARY...
#       The release layout (the release workflow), in the pattern esbuild and
#       biome use: prebuilt binaries, no build, one package per platform
#       holding the binary (`pi-agy-bridge-<os>-<cpu>`, with `os`/`cpu` fields
#       so npm installs only the matching one), e.g. linux-x64=dist/agy-bridge,
#       and the main package `pi-agy-bridge` (the pi extension from
#       pi-extension/) with all four as optionalDependencies. This is what
#       `pi install npm:pi-agy-bridge` installs from the registry.
#
# Every package gets the version of Cargo.toml; the main package pins its
# platform packages to it. Writes the tarballs, and nothing else, to
# <cargo target dir>/npm/ and prints their paths. Needs cargo, node and npm.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
PLATFORMS="linux-x64 linux-arm64 darwin-arm64 darwin-x64"

meta="$(cargo metadata --no-deps --format-version 1)"
VERSION="$(node -e 'const m=JSON.parse(require("fs").readFileSync(0,"utf8"));console.log(m.packages.find(p=>p.name==="agy-bridge").version)' <<<"$meta")"
TARGET_DIR="$(node -e 'console.log(JSON.parse(require("fs").readFileSync(0,"utf8")).target_directory)' <<<"$meta")"
OUT="$TARGET_DIR/npm"

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
pack() { # pack DIR: npm pack into $OUT, print the tarball's path
  local name
  name="$(cd "$1" && npm pack --silent --pack-destination "$OUT")"
  echo "$OUT/$name"
}
main_manifest() { # main_manifest FILES OPTIONAL_DEPS DEST: pi-extension's manifest, versioned
  FILES="$1" OPTIONAL="$2" VERSION="$VERSION" node -e '
    const fs = require("fs");
    const pkg = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
    pkg.version = process.env.VERSION;
    pkg.files = process.env.FILES.split(" ");
    const opt = process.env.OPTIONAL.split(" ").filter(Boolean);
    if (opt.length) pkg.optionalDependencies = Object.fromEntries(opt.map((p) => [`pi-agy-bridge-${p}`, process.env.VERSION]));
    fs.writeFileSync(process.argv[2], JSON.stringify(pkg, null, 2) + "\n");
  ' pi-extension/package.json "$3"
}

if [ $# = 0 ]; then
  # A local build: one package, the binary inside.
  cargo build --release -p agy-bridge --bin agy-bridge
  rm -rf "$OUT"
  mkdir -p "$OUT" "$STAGE/main/bin"
  # The extension spawns it, and it re-executes itself as agy's guardian.
  install -m 0755 "$TARGET_DIR/release/agy-bridge" "$STAGE/main/bin/agy-bridge"
  cp pi-extension/index.ts npm/README.md "$STAGE/main/"
  main_manifest "index.ts README.md bin/agy-bridge" "" "$STAGE/main/package.json"
  tgz="$(pack "$STAGE/main")"
  echo "$tgz"
  echo "install it into pi with:"
  echo "  pi install npm:pi-agy-bridge@file:$tgz"
  exit 0
fi

rm -rf "$OUT"
mkdir -p "$OUT"

# The release layout: one package per binary.
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
main_manifest "index.ts README.md" "$PLATFORMS" "$dir/package.json"
pack "$dir"
