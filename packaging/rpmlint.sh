#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# packaging/rpmlint.sh BUILD_DIR: rpmlint on packaging/mpi-pstate.spec and on
# every RPM `make rpm` left in BUILD_DIR/rpm (`make rpm-lint`).  Prints every
# finding; fails when rpmlint reports an error (a warning does not fail).
#
# A package is signed by whoever distributes it (`make rpm RPM_GPG_NAME=...`
# with the site's key).  Unsigned RPMs are linted as signed copies: a
# throwaway key in a temporary gpg home signs copies of them, and rpm's key
# ring for the check is a temporary database, so rpmlint checks everything
# else and the machine's keyring is not touched.
set -euo pipefail
die() { echo "make rpm-lint: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: packaging/rpmlint.sh BUILD_DIR"
for t in rpmlint rpmsign rpmkeys gpg; do
	command -v "$t" >/dev/null || die "$t not found: apt-get install rpmlint rpm gpg (make deps)"
done
here=$(cd "$(dirname "$0")" && pwd)
shopt -s nullglob
rpms=("$1"/rpm/SRPMS/*.src.rpm "$1"/rpm/RPMS/*/*.rpm)
[ ${#rpms[@]} -ge 2 ] || die "no source and binary RPMs under $1/rpm: run make rpm"

tmp=$(mktemp -d)
trap 'gpgconf --homedir "$tmp/gpg" --kill all 2>/dev/null || true; rm -rf "$tmp"' EXIT
mkdir -m 0700 "$tmp/gpg" "$tmp/home" "$tmp/copies"
printf '%%_dbpath %s\n' "$tmp/rpmdb" >"$tmp/home/.rpmmacros"
lint=()
for r in "${rpms[@]}"; do
	sig=$(rpm -K "$r" 2>/dev/null || true)
	if grep -qi 'signatures' <<<"$sig"; then
		lint+=("$r")
	else
		cp "$r" "$tmp/copies/" && lint+=("$tmp/copies/$(basename "$r")")
	fi
done
if compgen -G "$tmp/copies/*.rpm" >/dev/null; then
	export GNUPGHOME=$tmp/gpg
	gpg --batch --quiet --passphrase '' --quick-gen-key 'mpi-pstate rpm-lint <rpm-lint@localhost>' \
		rsa2048 sign 1d 2>/dev/null
	rpmsign --addsign --define "__gpg $(command -v gpg)" --define "_gpg_name rpm-lint@localhost" \
		--define "_gpg_sign_cmd_extra_args --batch --pinentry-mode loopback --passphrase ''" \
		"$tmp"/copies/*.rpm >/dev/null 2>&1 || die "rpmsign could not sign copies of the RPMs"
	gpg --export --armor rpm-lint@localhost >"$tmp/key.asc"
	HOME=$tmp/home rpm --initdb
	HOME=$tmp/home rpmkeys --import "$tmp/key.asc"
	echo "make rpm-lint: unsigned RPMs linted as copies signed with a throwaway key"
fi
rc=0
out=$(HOME=$tmp/home rpmlint "$here/mpi-pstate.spec" "${lint[@]}" 2>&1) || rc=$?
printf '%s\n' "$out"
errors=$(grep -cE '^[^ ]+: E: ' <<<"$out" || true)
# rpmlint exits 64 on errors and 66 over its badness threshold; any other
# non-zero exit is rpmlint failing to run.
[ "$errors" -eq 0 ] && [ "$rc" -ne 64 ] && [ "$rc" -ne 66 ] || die "$errors rpmlint error(s)"
[ "$rc" -eq 0 ] || die "rpmlint failed (exit $rc)"
echo "make rpm-lint: ${#rpms[@]} RPMs and the spec: no error"
