#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Body of one fake compute node.  Runs inside `unshare --mount --uts
# --propagation private` (started by `lab start`): gives the node its own
# hostname, /tmp, /dev/shm and fake cpufreq + RAPL hardware, then execs slurmd.
# usage: node.sh NODE LAB
set -euo pipefail
node=$1 lab=$2
here=$(dirname "$(readlink -f "$0")")
nd=$lab/nodes/$node

hostname "$node"
# The node gets a private /tmp.  A checkout that lives below /tmp (CI clones
# may) must stay visible at its own path inside the node, or neither this
# script's helpers nor the tests' build trees could be run there.
top=$(readlink -f "$here/../..")
case $top in
/tmp/*)
        mkdir -p "$nd/checkout"
        mount --bind "$top" "$nd/checkout"
        mount --bind "$nd/tmp" /tmp
        mkdir -p "$top"
        mount --bind "$nd/checkout" "$top"
        ;;
*) mount --bind "$nd/tmp" /tmp ;;
esac
mount -t tmpfs -o mode=1777,size=1g tmpfs /dev/shm

# Overlays over sysfs let us add cpufreq links, the P-state and uncore trees
# and the powercap class while the real topology files stay readable (`lab
# relink` replaces a flavour's package ids there); they exist in this
# namespace only.
rm -rf "$nd/ovl" "$nd/topology.orig.json"
mkdir -p "$nd"/ovl/{cpu,class}/{up,work} "$nd/fuse"
mount -t overlay overlay -o "lowerdir=/sys/devices/system/cpu,upperdir=$nd/ovl/cpu/up,workdir=$nd/ovl/cpu/work" /sys/devices/system/cpu
mount -t overlay overlay -o "lowerdir=/sys/class,upperdir=$nd/ovl/class/up,workdir=$nd/ovl/class/work" /sys/class
mkdir -p /sys/class/powercap

/usr/bin/python3 "$here/fakesys.py" "$nd/fuse" "$nd/fakesys.json" "$nd/cpufreq-writes.log" \
        >"$lab/log/fakesys-$node.log" 2>&1 &
echo $! >"$lab/run/fakesys-$node.pid"
for _ in $(seq 100); do
        [ -d "$nd/fuse/cpufreq" ] && break
        sleep 0.05
done
[ -d "$nd/fuse/cpufreq" ] || { echo "fakesys did not come up on $node" >&2; exit 1; }
mount --bind "$nd/fuse/cpufreq" /sys/devices/system/cpu/cpufreq
mount --bind "$nd/fuse/powercap" /sys/class/powercap
"$here/lab" relink "$node"

# Configless (`lab configless NODE on`): the node keeps no Slurm configuration
# of its own.  slurmd fetches it from slurmctld into its conf-cache; the lab's
# plugstack files are hidden so that only what slurmctld ships can count.
if [ -e "$nd/configless" ]; then
        unset SLURM_CONF
        mount --bind /dev/null "$lab/etc/slurm.conf"
        [ ! -e "$lab/etc/plugstack.conf" ] || mount --bind /dev/null "$lab/etc/plugstack.conf"
        mount -t tmpfs -o mode=755 tmpfs "$lab/etc/plugstack.conf.d"
        # slurmd links its conf-cache as /run/slurm/conf: the node's own /run.
        mkdir -p /run/slurm
        mount -t tmpfs -o mode=755 tmpfs /run/slurm
        exec /usr/sbin/slurmd -N "$node" --conf-server "$MPI_PSTATE_CONF_SERVER"
fi
exec /usr/sbin/slurmd -N "$node"
