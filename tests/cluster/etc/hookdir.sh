#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs every executable in <this file's name>.d/ in name order, so that each
# component drops its own Prolog/Epilog/EpilogSlurmctld part in place.  A
# failing part is logged and does not stop the others; the exit status is the
# first failure's (Slurm drains a node on a failing Prolog/Epilog, so parts
# must exit 0 on their own problems and only fail on a real node fault).
# Slurm 22.05 discards the hooks' output and this machine has no syslog
# daemon, so each part's stderr is appended to log/hooks-<user>.log.
dir="$0.d"
lab=$(dirname "$(dirname "$0")")
log="$lab/log/hooks-$(id -un).log"
# EpilogSlurmctld gets no SLURM_CONF; libslurm and sacct need the lab's.  A
# configless node has none of its own (hidden, empty): leave it unset there.
[ -n "${SLURM_CONF:-}" ] || [ ! -s "$lab/etc/slurm.conf" ] || export SLURM_CONF=$lab/etc/slurm.conf
rc=0
for part in "$dir"/*; do
        [ -x "$part" ] && [ -f "$part" ] || continue
        "$part" 2> >(sed "s|^|$(date +%FT%T) ${SLURM_JOB_ID:-?} ${part##*/}: |" >>"$log")
        prc=$?
        if [ $prc -ne 0 ]; then
                echo "$(date +%FT%T) ${SLURM_JOB_ID:-?} $part exited $prc" >>"$log"
                [ $rc -eq 0 ] && rc=$prc
        fi
done
exit $rc
