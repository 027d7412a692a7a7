#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs every Debian package mpi-pstate needs to build, test and demo
# (Debian 12 "bookworm").  Idempotent; --if-missing returns at once when all
# are present, so `make check` and `make demo` can call it every time.
set -euo pipefail
PKGS=(
        # build
        build-essential pkg-config gcc make clang-format
        libslurm-dev libhwloc-dev hwloc check
        # the local cluster: Slurm 22.05 with accounting
        slurm-wlm slurmctld slurmd slurm-client slurmdbd slurm-wlm-doc munge mariadb-server
        # both MPI families with C and Fortran compilers, PMIx for srun --mpi=pmix
        openmpi-bin libopenmpi-dev mpich libmpich-dev gfortran libpmix-dev libpmix-bin hpcc python3-mpi4py
        # fake sysfs and test tools
        fuse3 python3 python3-fusepy util-linux procps iproute2 man-db groff-base valgrind strace
        dpkg-dev lintian rpm  # packaging/: make deb, make deb-lint, make rpm
        runc  # test_containers.py: Slurm's --container (rootless OCI runtime; crun refuses cgroup v1 hybrid)
)
# The host's own tools for the Debian 13 and arm64 roots (tests/cluster/debroot);
# kept out of PKGS, which is also the roots' package list (and their cache key),
# and not wanted inside a root (debroot sets MPI_PSTATE_DEBROOT there; a root
# has no network to fetch them).
HOST_PKGS=(mmdebstrap qemu-user-static binfmt-support
        # the metrics tests (lab watch: Prometheus, node_exporter) and the report's
        # page in a headless browser; the roots' releases run without them
        prometheus prometheus-node-exporter curl chromium
        # make rpm-lint (rpmlint on the spec and the RPMs: packaging/mkrpm.sh)
        rpmlint)
[ -n "${MPI_PSTATE_DEBROOT:-}" ] || PKGS+=("${HOST_PKGS[@]}")
# Inside a root, what it was made with (its /.mpi-pstate-debroot) is all
# there is: a package its suite lacks was replaced there (debroot says how).
if [ -n "${MPI_PSTATE_DEBROOT:-}" ] && [ -f /.mpi-pstate-debroot ]; then
        mapfile -t PKGS < <(printf '%s\n' "${PKGS[@]}" | grep -xF -f /.mpi-pstate-debroot)
fi
missing=()
for p in "${PKGS[@]}"; do
        dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null | grep -x installed >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
        [ "${1:-}" = --if-missing ] || echo "deps: all ${#PKGS[@]} packages installed"
        exit 0
fi
[ "$(id -u)" = 0 ] || { echo "deps: missing packages (${missing[*]}); run 'make deps' as root" >&2; exit 1; }
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# No service manager here: policy-rc.d keeps postinst scripts from starting daemons.
apt-get install -y -qq "${PKGS[@]}" >/dev/null
echo "deps: done"
