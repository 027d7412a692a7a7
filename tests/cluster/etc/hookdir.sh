#!/bin/bash
# Runs every executable in <this file's name>.d/ in name order, so that each
# component drops its own Prolog/Epilog/EpilogSlurmctld part in place.  A
# failing part is logged and does not stop the others; the exit status is the
# first failure's (Slurm drains a node on a failing Prolog/Epilog, so parts
# must exit 0 on their own problems and only fail on a real node fault).
dir="$0.d"
rc=0
for part in "$dir"/*; do
        [ -x "$part" ] && [ -f "$part" ] || continue
        "$part"
        prc=$?
        if [ $prc -ne 0 ]; then
                logger -t mpi-pstate-lab "$(basename "$0"): $part exited $prc" 2>/dev/null
                echo "$(date +%FT%T) $part exited $prc job=${SLURM_JOB_ID:-?}" >>"$dir/../../log/hooks-$(id -un).log"
                [ $rc -eq 0 ] && rc=$prc
        fi
done
exit $rc
