#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# packaging/mkrpm.sh BUILD_DIR: RPMs of this tree from packaging/mpi-pstate.spec
# (`make rpm`): a source tarball of the checked-in files (as they are in the
# working tree), then rpmbuild -ba with _topdir BUILD_DIR/rpm.  Results in
# BUILD_DIR/rpm/RPMS/<arch>/ and BUILD_DIR/rpm/SRPMS/.
#
# On a system whose packages are not RPMs (Debian: rpm and rpmbuild from the
# "rpm" package, Slurm headers from libslurm-dev), the rpm database knows none
# of the BuildRequires: they are not checked (--nodeps), and no debuginfo
# package is made when rpm's debugedit tools are missing.  That build checks
# the spec (sections, %files against `make install`, automatic dependencies);
# the RPMs to install are built on the RPM distribution, against its Slurm.
set -euo pipefail
die() { echo "make rpm: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: packaging/mkrpm.sh BUILD_DIR"
: "${VERSION:?make rpm: VERSION is not set (run it through make rpm)}"
for t in rpmbuild rpmspec tar; do
	command -v "$t" >/dev/null || die "$t not found: install rpm (Debian: apt-get install rpm; make deps)"
done
TOP=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
SPEC=$TOP/packaging/mpi-pstate.spec
TOPDIR=$OUT/rpm

v=$(rpmspec -q --srpm --qf '%{VERSION}\n' "$SPEC") || die "rpmspec cannot parse $SPEC"
[ "$v" = "$VERSION" ] || die "$SPEC has Version $v but the Makefile's VERSION is $VERSION"
name=mpi-pstate-$VERSION

rm -rf "$TOPDIR"
mkdir -p "$TOPDIR"/{SOURCES,SPECS,BUILD,RPMS,SRPMS}
cd "$TOP"
if files=$(git ls-files -z 2>/dev/null | tr '\0' '\n') && [ -n "$files" ]; then
	:
else
	files=$(find . \( -name .git -o -name 'build' -o -name 'build-*' -o -name __pycache__ \) -prune \
		-o -type f -printf '%P\n' | LC_ALL=C sort)
fi
printf '%s\n' "$files" | tar --create --gzip --file "$TOPDIR/SOURCES/$name.tar.gz" \
	--owner=0 --group=0 --numeric-owner --transform "s,^,$name/," --verbatim-files-from --files-from -
cp "$SPEC" "$TOPDIR/SPECS/"

flags=(--define "_topdir $TOPDIR")
if ! rpm -q --whatprovides slurm-devel >/dev/null 2>&1; then
	echo "make rpm: the rpm database has no slurm-devel: building with --nodeps (this system's own headers)"
	flags+=(--nodeps)
fi
if [ ! -x /usr/lib/rpm/find-debuginfo.sh ] && ! command -v find-debuginfo >/dev/null; then
	flags+=(--define "debug_package %{nil}")
fi
# Packager: the site's (%packager in ~/.rpmmacros, or RPM_PACKAGER), else the
# project's maintainers as packaging/debian/control names them.
if [ -n "${RPM_PACKAGER:-}" ]; then
	flags+=(--define "packager $RPM_PACKAGER")
elif [ "$(rpm --eval '%{?packager}')" = "" ]; then
	flags+=(--define "packager $(sed -n 's/^Maintainer: //p' "$TOP/packaging/debian/control")")
fi
jobs=${RPM_JOBS:-2}
rpmbuild -ba "${flags[@]}" --define "_smp_mflags -j$jobs" "$TOPDIR/SPECS/mpi-pstate.spec"
# Signed with the site's key when it names one (RPM_GPG_NAME: a key in gpg's
# keyring, as for `rpmsign --addsign`); a signature is the site's, not ours.
if [ -n "${RPM_GPG_NAME:-}" ]; then
	rpmsign --addsign --define "_gpg_name $RPM_GPG_NAME" "$TOPDIR"/RPMS/*/*.rpm "$TOPDIR"/SRPMS/*.rpm
fi
echo "make rpm: $(cd "$TOPDIR" && ls RPMS/*/*.rpm SRPMS/*.rpm | sed "s,^,$TOPDIR/," | tr '\n' ' ')"
