#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# packaging/mkdeb.sh BUILD_DIR: builds BUILD_DIR/mpi-pstate_<VERSION>+slurm<X.Y>_<arch>.deb,
# the Debian binary package of this tree built against the installed Slurm.
# `make deb` runs it (VERSION and MAKE come from the Makefile).
#
# The tools: dpkg-deb, dpkg-shlibdeps and dpkg-gencontrol, not dpkg-buildpackage
# with debhelper, because
#  - the project has one install procedure, `make install DESTDIR=`; the package
#    is exactly its output (prefix=/usr) plus what Debian policy adds (stripped
#    binaries, compressed man pages, copyright and changelog), and these few
#    steps say so in one place;
#  - dpkg-buildpackage wants debian/ at the top of the source tree, runs
#    `debian/rules clean` there and writes its results into the parent
#    directory, outside the build dir; debhelper would add a build dependency
#    (and its own defaults) for what the steps below do;
#  - all three are Debian's own tools from dpkg-dev, which build-essential
#    already installs: dpkg-shlibdeps derives the library dependencies
#    (libslurmNN, libhwloc, libc) from the binaries' NEEDED entries
#    and the installed shlibs/symbols files, dpkg-gencontrol writes the control
#    file (Installed-Size, substitutions), dpkg-deb builds the archive with
#    root:root ownership without fakeroot.
#
# Slurm: a SPANK plugin loads only into the Slurm release (major.minor) whose
# headers it was compiled with ("Incompatible plugin version" otherwise), and
# srun, sbatch and slurmstepd take Slurm's symbols from libslurmfull.so of
# the package that owns Slurm's plugin directory (slurm-wlm-basic-plugins on
# Debian, on which slurmd and slurm-client depend with "=").  So the package
#  - is versioned <VERSION>+slurm<X.Y> (a rebuild for a new Slurm sorts newer),
#  - Breaks that package outside [X.Y, next release): apt then cannot upgrade
#    Slurm under it silently: `apt upgrade` keeps Slurm back, `apt full-upgrade`
#    lists mpi-pstate for removal, `apt install ./mpi-pstate_*.deb` built
#    against another Slurm is refused with the versions named.  Breaks, not
#    Depends: the command (reports, mpi-pstate-exec) is useful on a machine
#    without slurmd, and the plugin cannot be loaded without Slurm anyway.
#
# Activates nothing: no maintainer script, no conffile; the plugstack snippet
# goes to /usr/share/mpi-pstate with its line commented out.
set -euo pipefail

die() { echo "make deb: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: packaging/mkdeb.sh BUILD_DIR"
: "${VERSION:?make deb: VERSION is not set (run it through make deb)}"
MAKE=${MAKE:-make}
PKG=mpi-pstate
TOP=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
WORK=$OUT/deb
SRC=$WORK/src              # a minimal Debian source layout for dpkg-shlibdeps and dpkg-gencontrol
ROOT=$SRC/debian/$PKG      # the package's file system tree

for t in dpkg-architecture dpkg-buildflags dpkg-checkbuilddeps dpkg-shlibdeps dpkg-gencontrol dpkg-deb dpkg-query gcc strip gzip md5sum; do
	command -v "$t" >/dev/null || die "$t not found: install dpkg-dev and build-essential (make deps)"
done
cd "$TOP"
dpkg-checkbuilddeps packaging/debian/control ||
	die "install the build dependencies named above (make deps installs them all)"

ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
PLUGINDIR=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/slurm-wlm

# The Slurm release of the headers the plugin is compiled with.
num=$(printf '#include <slurm/slurm_version.h>\nSLURM_VERSION_NUMBER\n' | gcc -E -P -x c - 2>/dev/null | tail -n 1) || true
case $num in
0x*) ;;
*) die "cannot read SLURM_VERSION_NUMBER from <slurm/slurm_version.h>: install libslurm-dev" ;;
esac
SLURM_MM=$(printf '%d.%02d' $((num >> 16 & 255)) $((num >> 8 & 255)))
SLURM_NEXT=$(printf '%d.%02d' $((num >> 16 & 255)) $(((num >> 8 & 255) + 1)))

# The package whose libslurmfull.so the Slurm programs load the plugin into.
owner=$(dpkg-query -S "$PLUGINDIR/libslurmfull.so" 2>/dev/null | sed -n 1p) ||
	die "no installed package owns $PLUGINDIR/libslurmfull.so: install slurm-wlm-basic-plugins"
owner=${owner%%: *}
owner=${owner%%:*}
sver=$(dpkg-query -W -f '${Version}' "$owner")
upstream=${sver#*:}
upstream=${upstream%%-*}
case $upstream in
"$SLURM_MM" | "$SLURM_MM".*) ;;
*) die "the Slurm headers are release $SLURM_MM but $owner is $sver: install the libslurm-dev of the same Slurm" ;;
esac
epoch=
case $sver in *:*) epoch=${sver%%:*}: ;; esac
BREAKS="$owner (<< $epoch$SLURM_MM~), $owner (>= $epoch$SLURM_NEXT~)"
DEBVER=$VERSION+slurm$SLURM_MM

# Timestamps: the last commit's, for a reproducible changelog and archive.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$TOP" log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

rm -rf "$SRC"
mkdir -p "$SRC/debian"
cp packaging/debian/control "$SRC/debian/control"

# 1. make install, in a build dir of its own so that the prefix=/usr build
#    (the plugin's compiled-in paths) never replaces the developer's build.
#    Every directory variable is given, so none can come in from MAKEFLAGS.
#    The compiler flags are Debian's (dpkg-buildflags: its hardening, -O2,
#    -ffile-prefix-map; DEB_BUILD_MAINT_OPTIONS and DEB_CFLAGS_APPEND are
#    honoured as dpkg-buildpackage would), after the project's own.
"$MAKE" -C "$TOP" B="$WORK/build" prefix=/usr exec_prefix=/usr bindir=/usr/bin sbindir=/usr/sbin \
	libdir=/usr/lib libexecdir=/usr/libexec datadir=/usr/share mandir=/usr/share/man \
	sysconfdir=/etc SLURM_PLUGINDIR="$PLUGINDIR" DESTDIR="$ROOT" \
	CPPFLAGS="$(dpkg-buildflags --get CPPFLAGS)" CFLAGS="$(dpkg-buildflags --get CFLAGS)" \
	LDFLAGS="$(dpkg-buildflags --get LDFLAGS)" install

# 2. What debhelper's dh_strip, dh_compress, dh_installdocs, dh_installchangelogs
#    and dh_fixperms would add.  Debug information is not kept (no -dbgsym).
is_elf() { [ "$(head -c 4 "$1" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; }
elfs=()
while IFS= read -r -d '' f; do
	if is_elf "$f"; then
		strip --remove-section=.comment --remove-section=.note --strip-unneeded "$f"
		elfs+=("$f")
	fi
done < <(find "$ROOT" -type f -print0 | sort -z)
[ ${#elfs[@]} -gt 0 ] || die "make install put no binary into $ROOT"
find "$ROOT/usr/share/man" -type f ! -name '*.gz' -exec gzip -9n {} +
doc=$ROOT/usr/share/doc/$PKG
install -d "$doc"
install -m 0644 packaging/debian/copyright "$doc/copyright"
maint=$(sed -n 's/^Maintainer: //p' packaging/debian/control)
commit=$(git -C "$TOP" rev-parse --short HEAD 2>/dev/null || echo unknown)
cat >"$SRC/debian/changelog" <<EOF
$PKG ($DEBVER) $( (. /etc/os-release && echo "${VERSION_CODENAME:-unstable}") 2>/dev/null || echo unstable); urgency=medium

  * mpi-pstate $VERSION (commit $commit) built against Slurm $SLURM_MM
    ($owner $sver).

 -- $maint  $(date -R -u -d "@$SOURCE_DATE_EPOCH")
EOF
gzip -9nc "$SRC/debian/changelog" >"$doc/changelog.gz"
# Modes independent of the umask and of the checkout's own permissions.
find "$ROOT" -type d -exec chmod 0755 {} +
find "$ROOT" -type f -perm /111 -exec chmod 0755 {} +
find "$ROOT" -type f ! -perm /111 -exec chmod 0644 {} +
# A shared object is loaded, not run: dh_fixperms makes every *.so 0644.
find "$ROOT" -type f -name '*.so' -exec chmod 0644 {} +

# 3. Dependencies and control file.  The plugin and the preload backends
#    resolve Slurm's and MPI's symbols from the process that loads them:
#    warning bit 1 ("symbol ... found in none of the libraries") is expected
#    for them and left out; the others stay.
#    dpkg-shlibdeps finds the package's tree by its DEBIAN directory.
install -d -m 0755 "$ROOT/DEBIAN"
cd "$SRC"
elf_args=()
for f in "${elfs[@]}"; do elf_args+=("-e${f#"$SRC"/}"); done
dpkg-shlibdeps --warnings=6 -T"debian/$PKG.substvars" "${elf_args[@]}"
grep -q '^shlibs:Depends=.*libslurm' "debian/$PKG.substvars" ||
	die "dpkg-shlibdeps found no libslurm dependency: $(cat "debian/$PKG.substvars")"
dpkg-gencontrol -p"$PKG" -cdebian/control -ldebian/changelog -T"debian/$PKG.substvars" \
	-P"debian/$PKG" -fdebian/files -v"$DEBVER" -V"slurm:Breaks=$BREAKS"
(cd "$ROOT" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
	xargs -0 md5sum) >"$ROOT/DEBIAN/md5sums"
chmod 0644 "$ROOT/DEBIAN/control" "$ROOT/DEBIAN/md5sums"

# 4. The archive; an older one (another version or Slurm) is removed so that
#    BUILD_DIR holds exactly one.
rm -f "$OUT/${PKG}"_*_"$ARCH".deb
deb=$OUT/${PKG}_${DEBVER}_$ARCH.deb
dpkg-deb --root-owner-group -Zxz --build "$ROOT" "$deb.tmp" >/dev/null
mv -f "$deb.tmp" "$deb"
echo "make deb: $deb"
dpkg-deb -f "$deb" Version Depends Breaks | sed 's/^/  /'
