cd /work/main
eval "$(tests/cluster/lab env)"
tests/cluster/lab start >/dev/null 2>&1
scancel -u mpstuser; sleep 3
su -s /bin/bash mpstuser -c "cd /tmp; sbatch -N1 -n2 -w n1 --mpi-pstate=on --wrap 'srun true'; sbatch -N1 -n2 -w n1 --mpi-pstate=on --wrap 'srun sleep 6'" 
for i in 1 2 3 4 5 6 7 8; do sleep 1; find /sys/fs/cgroup/freezer -maxdepth 4 -type d -name 'job_*' | while read d; do echo "$i $d procs=$(find $d -name cgroup.procs -exec cat {} + | tr '\n' ' ')"; done; done
sleep 8
squeue
for j in $(ls /var/spool/mpi-pstate-lab/records | sort -n | tail -2); do python3 -c "
import json,sys; d=json.load(open('/var/spool/mpi-pstate-lab/records/$j/node.n1.json'))
for s in d['steps']: print($j, s['step'], json.dumps((s.get('plugin') or {}).get('cgroup')))"; done
tests/cluster/lab stop >/dev/null 2>&1
