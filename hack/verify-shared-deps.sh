#!/usr/bin/env bash
# Fails when a package that two of the builds compile (the main module's
# vet, tests and image, and each tool or benchmark module's) comes from
# different module versions in the two. Go's build cache shares a compiled
# package between modules only where its module version, build flags and
# dependencies all match; each difference compiles that package, and
# everything above it, twice on a cold machine.
#
# usage: verify-shared-deps.sh MODULE_DIR[=PACKAGE,...]...
# (a module's packages default to ./... with their tests). Each module is
# checked against the main module and against every module before it.
# SHARED_DEPS_SPLIT lists modules (path only) allowed to differ, each for
# a reason its caller states.
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

allowed() {
  local m
  for m in ${SHARED_DEPS_SPLIT:-}; do printf '%s@\n' "$m"; done
}
allowed >"$tmp/allowed"

names=(go.mod)
deps -test ./... >"$tmp/0"
failed=0
for arg in "$@"; do
  dir=${arg%%=*}
  if [ "$arg" = "$dir" ]; then pkgs=(-test ./...); else IFS=, read -ra pkgs <<<"${arg#*=}"; fi
  n=${#names[@]}
  (cd "$dir" && deps "${pkgs[@]}") >"$tmp/$n"
  for ((i = 0; i < n; i++)); do
    join "$tmp/$i" "$tmp/$n" >"$tmp/both"
    [ -s "$tmp/both" ] || continue
    awk '$2 != $3 { print "  " $2, $3 }' "$tmp/both" | sort -u | grep -v -F -f <(sed 's/^/  /' "$tmp/allowed") >"$tmp/differ" || true
    if [ -s "$tmp/differ" ]; then
      echo "$dir and ${names[$i]}: packages both compile come from different versions (${names[$i]}'s, then $dir's);"
      echo "require the higher version in the other module:"
      cat "$tmp/differ"
      failed=1
    elif [ "$i" = 0 ]; then
      echo "$dir: the $(wc -l <"$tmp/both") packages it and the main module both compile come from the same versions"
    fi
  done
  names+=("$dir")
done
exit $failed
