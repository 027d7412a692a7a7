#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# packaging/lint.sh BUILD_DIR: lintian on BUILD_DIR/mpi-pstate_*.deb (`make deb-lint`).
# Prints every tag; fails on a tag that packaging/lintian-expected does not list.
set -euo pipefail
die() { echo "make deb-lint: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: packaging/lint.sh BUILD_DIR"
command -v lintian >/dev/null || die "lintian not found: apt-get install lintian (make deps)"
here=$(cd "$(dirname "$0")" && pwd)
shopt -s nullglob
debs=("$1"/mpi-pstate_*.deb)
[ ${#debs[@]} -eq 1 ] || die "expected one $1/mpi-pstate_*.deb, found ${#debs[@]}: run make deb"
# lintian exits non-zero on errors; the tags decide here.
out=$(lintian --pedantic -E -I -v --color never "${debs[0]}" 2>&1 | grep -E '^[EWIPX]: ' || true)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
expected=$(sed -e 's/[[:space:]]*#.*//' -e '/^$/d' -e "s|<triplet>|$triplet|g" "$here/lintian-expected")
unexpected=0
while IFS= read -r line; do
	[ -n "$line" ] || continue
	tag=${line#?: mpi-pstate: }
	if grep -qxF -- "$tag" <<<"$expected"; then
		echo "expected   $line"
	else
		echo "UNEXPECTED $line"
		unexpected=$((unexpected + 1))
	fi
done <<<"$out"
[ "$unexpected" -eq 0 ] || die "$unexpected unexpected lintian tag(s) on ${debs[0]}"
echo "make deb-lint: ${debs[0]}: no unexpected tag"
