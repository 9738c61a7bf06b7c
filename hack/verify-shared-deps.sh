#!/usr/bin/env bash
# Fails when a package that the main module's build (vet, tests, the image)
# and another module's build both compile comes from different module
# versions in the two. Go's build cache shares a compiled package between
# modules only where its module version, build flags and dependencies all
# match; each difference compiles that package, and everything above it,
# twice on a cold machine.
#
# usage: verify-shared-deps.sh MODULE_DIR[=PACKAGE,...]...
# (a module's packages default to ./... with their tests)
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C

fmt='{{if .Module}}{{.ImportPath}} {{with .Module.Replace}}{{.Path}}@{{.Version}}{{else}}{{.Module.Path}}@{{.Module.Version}}{{end}}{{end}}'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Left out: the standard library (no module), the main module's packages
# (no version: the module itself, or a replace by its directory), which are
# the same source in every module, and test variants ("p [p.test]").
deps() { go list -deps -f "$fmt" "$@" | grep -v -e '^$' -e '@$' -e ' \[' | sort -u; }

deps -test ./... >"$tmp/main"
failed=0
for arg in "$@"; do
  dir=${arg%%=*}
  if [ "$arg" = "$dir" ]; then pkgs=(-test ./...); else IFS=, read -ra pkgs <<<"${arg#*=}"; fi
  (cd "$dir" && deps "${pkgs[@]}") >"$tmp/other"
  join "$tmp/main" "$tmp/other" >"$tmp/both"
  awk '$2 != $3 { print "  " $2, $3 }' "$tmp/both" | sort -u >"$tmp/differ"
  if [ -s "$tmp/differ" ]; then
    echo "$dir: packages both modules compile come from different versions (go.mod's, then $dir's);"
    echo "require the higher version in the other module:"
    cat "$tmp/differ"
    failed=1
  else
    echo "$dir: the $(wc -l <"$tmp/both") packages both modules compile come from the same versions"
  fi
done
exit $failed
