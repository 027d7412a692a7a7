#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# `make demo`: start the local two-node cluster, install this build into it,
# run an imbalanced MPI job with --mpi-pstate as an ordinary user, and show
# what the user and the admin see afterwards.
set -euo pipefail
TOP=$(readlink -f "$(dirname "$0")/../..")
LAB_CMD=$TOP/tests/cluster/lab
B=${B:-build}
"$LAB_CMD" start
"$LAB_CMD" install
eval "$("$LAB_CMD" env)"
# shellcheck disable=SC1091
. "$MPI_PSTATE_LAB/etc/installed.env"  # where `make install` put it: bindir, ...
USER_NAME=${MPI_PSTATE_TEST_USER:-mpstuser}
HOME_DIR=$(getent passwd "$USER_NAME" | cut -d: -f6)
WD=$HOME_DIR/mpi-pstate-demo
mkdir -p "$WD"
install -m 755 "$TOP/$B/tests/mpi/imbalance.openmpi" "$WD/imbalance"
cat >"$WD/job.sh" <<'JOB'
#!/bin/bash
#SBATCH -N 2 --ntasks-per-node=1 -c 2 -t 5 -J pstate-demo
# Rank 0 computes 50 ms per iteration while rank 1 waits in MPI_Barrier.
srun --mpi=pmix ./imbalance 40 50
JOB
chown -R "$USER_NAME": "$WD"
run_user() { runuser -u "$USER_NAME" -- env SLURM_CONF="$SLURM_CONF" PATH="$bindir:/usr/bin:/bin" "$@"; }

declare -A mark
for n in n1 n2; do mark[$n]=$(wc -l <"$MPI_PSTATE_LAB/nodes/$n/cpufreq-writes.log"); done
echo "== sbatch --mpi-pstate job.sh   (as $USER_NAME)"
job=$(cd "$WD" && run_user sbatch --parsable --mpi-pstate job.sh) || { echo "demo: sbatch --mpi-pstate refused" >&2; exit 1; }
echo "job $job submitted"
for _ in $(seq 600); do
        [ -z "$(squeue -h -j "$job" -o %T 2>/dev/null)" ] && break
        sleep 0.2
done
# The summary reaches slurmdbd from EpilogSlurmctld, shortly after the job.
for _ in $(seq 100); do
        sacct -n -X -P -j "$job" -o SystemComment 2>/dev/null | grep '^mpi-pstate/' >/dev/null && break
        sleep 0.2
done
echo "== job output"
cat "$WD/slurm-$job.out"
echo "== P-state changes made on the fake nodes during the job (first 12 per node)"
for n in n1 n2; do
        echo "-- $n: $(($(wc -l <"$MPI_PSTATE_LAB/nodes/$n/cpufreq-writes.log") - mark[$n])) writes"
        # sed, not tail|head: under pipefail a reader that stops early
        # fails the demo with SIGPIPE whenever the log outgrows one write.
        sed -n "$((mark[$n] + 1)),$((mark[$n] + 12))p" "$MPI_PSTATE_LAB/nodes/$n/cpufreq-writes.log"
done
echo "== sacct -j $job -o JobID,State,Elapsed,SystemComment%200"
sacct -j "$job" -X -o JobID,State,Elapsed,SystemComment%200
echo "== mpi-pstate report $job"
run_user mpi-pstate report "$job"
state=$(sacct -n -X -P -j "$job" -o State | sed -n 1p)
[ "$state" = COMPLETED ] || { echo "demo: job $job ended $state" >&2; exit 1; }
comment=$(sacct -n -X -P -j "$job" -o SystemComment)
grep -q '^mpi-pstate/' <<<"$comment" ||
        { echo "demo: job $job has no mpi-pstate summary in SystemComment" >&2; exit 1; }
echo
echo "The cluster keeps running: 'eval \$($LAB_CMD env)' to use it, '$LAB_CMD stop' to stop it."
