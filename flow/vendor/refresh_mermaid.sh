#!/bin/sh
# Refresh the vendored Mermaid library (docs/decisions/0007-mermaid-vendored.md): the npm
# package's pre-built dist/mermaid.min.js and its LICENSE, copied into flow's static files.
# Usage: flow/vendor/refresh_mermaid.sh [version-or-range]   (default: 11, the newest 11.x)
set -eu
range="${1:-11}"
here="$(cd "$(dirname "$0")/.." && pwd)"
target="$here/static/flow/vendor/mermaid"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "mermaid@$range" >/dev/null && tar xzf mermaid-*.tgz)
version="$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$work/package/package.json" | head -n 1)"
cp "$work/package/dist/mermaid.min.js" "$work/package/LICENSE" "$target/"
sum="$(sha256sum "$target/mermaid.min.js" | cut -d' ' -f1)"
printf 'mermaid %s (npm), dist/mermaid.min.js sha256 %s\n' "$version" "$sum" > "$target/VERSION"
cat "$target/VERSION"
