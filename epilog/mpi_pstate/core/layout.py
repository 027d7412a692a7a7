# SPDX-License-Identifier: BSD-3-Clause
"""Where mpi-pstate keeps its files and how they are named: the one
spelling, in Python, of every directory, file name and name pattern the
package reads or writes.  Imported by every role (the node Epilog and the
controller as root and SlurmUser, the user's commands); names and patterns
only, no I/O.

The C side spells the node's part in spank/paths.h (the step directory and
the segment), common/restore.h (the restore records) and agent/agentd.h
(the knee file); the node Epilog's fast path (epilog/mpi-pstate-epilog.in,
a shell script) looks for steps/<job>.* and restore/* itself.

On a compute node, below runtime_dir (root's; %h: the short host name):

    <runtime>/restore/<record>           RESTORE_DIR, RESTORE_RECORD_RE: what a
                                         step changed and has not put back
    <runtime>/steps/<job>.<step>/        STEPS_DIR, STEP_DIR_RE: one a step
        plugin.json agent.json sums.json agent.log agent.pid   (STEP_KNOWN_FILES)
    <runtime>/pending/<job>.<node>.json  PENDING_DIR, PENDING_RE: node records
                                         waiting for collect_dir
    <runtime>/restore-failures.json      FAILURES_FILE
    <runtime>/metrics.json               NODE_STATE_FILE
    /dev/shm/mpi-pstate.<job>.<step>[.<16 hex>]   SHM_DIR, SEGMENT_RE: a
                                         step's slot segment (the job user's)

In collect_dir (SlurmUser's, shared by the nodes and the controller):

    <collect>/<job>/node.<node>.json     node_record_name(): a node record
    <collect>/<job>/job.json             JOB_FILE: the merged detail
    <collect>/.queue/<job>.json          QUEUE_DIR, queue_name(): jobs to summarise
    <collect>/.queue/late/<job>.json     LATE_DIR: summarised without every node

In metrics_dir (node_exporter's textfile directory): JOB_METRICS_RE
(mpi_pstate_job_<job>.prom), QUEUE_METRICS_FILE, NODE_METRICS_FILE.
Slurm's job cgroups: CGROUP_ROOT, CGROUP_GLOBS, CGROUP_JOB_RE (job_<job>).
The node's calibration: DEFAULT_MODEL and KNEE_FILE beside it, the agent's
AGENT_KNEE_FILE.  A profile directory of `mpi-pstate exec --profile`:
RANK_PROFILE_GLOB, RANK_PROFILE_RE (rank-<R>.json, the preload library's)."""
import re
from typing import Optional

from ..agent_args import agent_default

# ---- defaults of the plugstack keys (spank/plugstack.h)
COLLECT_DIR = "/var/spool/mpi-pstate/records"
RUNTIME_DIR = "/run/mpi-pstate"

# ---- a step: its name, its directory, its segment
# Slurm's special steps by name; any other step by its number.
STEP_WORDS = ("batch", "extern", "interactive")
STEP_NAME = r"[0-9]{1,10}|" + "|".join(STEP_WORDS)
STEP_NAME_RE = re.compile(STEP_NAME)
STEPS_DIR = "steps"
STEP_DIR_RE = re.compile(r"([0-9]{1,10})\.(" + STEP_NAME + ")")  # <job>.<step>
PLUGIN_JSON = "plugin.json"  # the plugin's step record (root's)
AGENT_JSON = "agent.json"  # the agent's record
SUMS_JSON = "sums.json"  # the agent's per-step sums
AGENT_LOG = "agent.log"
AGENT_PID = "agent.pid"
STEP_RECORDS = (AGENT_JSON, PLUGIN_JSON)
# The agent's records: root creates them empty before the agent drops its
# privileges, and the agent fills them through the open descriptor at its
# exit, so an empty one is an agent that never wrote it: read as missing.
AGENT_RECORDS = (AGENT_JSON, SUMS_JSON)
# what the plugin and the agent leave in a step directory (spank/paths.h)
STEP_KNOWN_FILES = STEP_RECORDS + (SUMS_JSON, AGENT_LOG, AGENT_PID)

SHM_DIR = "/dev/shm"
# The plugin names a segment mpi-pstate.J.S.R, R 16 random hex digits
# (spank/, its step record names it): a name nobody else can guess and squat.
# An mpi-pstate before it made mpi-pstate.J.S: still accepted, but only
# when its root-owned step record names it.  Groups: job, step.
SEGMENT_RE = re.compile(r"mpi-pstate\.([0-9]{1,10})\.(" + STEP_NAME + r")(?:\.[0-9a-f]{16})?")

# ---- the rest of runtime_dir
RESTORE_DIR = "restore"
# a restore record (common/restore.c's names): policy<N> (cpu<N> of old
# releases), uncore-<domain>
RESTORE_RECORD_RE = re.compile(
    r"(?:policy|cpu)[0-9]{1,7}|uncore-package_[0-9]{2,4}_die_[0-9]{2,4}")
PENDING_DIR = "pending"
PENDING_RE = re.compile(r"([0-9]{1,10})\.([A-Za-z0-9][A-Za-z0-9._-]{0,63})\.json")
FAILURES_FILE = "restore-failures.json"  # root's, 0600
NODE_STATE_FILE = "metrics.json"  # the node's counters since boot


def step_dir_name(job: int, step: str) -> str:
    return f"{job}.{step}"


def pending_name(job: int, node: str) -> str:
    """node: a safe name already (parse.safe_name)."""
    return f"{job}.{node}.json"


# ---- collect_dir
JOB_FILE = "job.json"
NODE_FILE_PREFIX = "node."
RECORD_SUFFIX = ".json"
QUEUE_DIR = ".queue"
LATE_DIR = "late"  # below QUEUE_DIR


def node_record_name(node: str) -> str:
    """node: a safe name already (parse.safe_name)."""
    return f"{NODE_FILE_PREFIX}{node}{RECORD_SUFFIX}"


def node_of_record_name(name: str) -> Optional[str]:
    """The node a file name of a job directory is the record of, or None
    (job.json, a temporary file of safeio.write_atomic)."""
    if name.startswith(NODE_FILE_PREFIX) and name.endswith(RECORD_SUFFIX):
        return name[len(NODE_FILE_PREFIX):-len(RECORD_SUFFIX)]
    return None


def queue_name(job: int) -> str:
    """A queue entry's (and a late entry's) file name."""
    return f"{job}{RECORD_SUFFIX}"


# ---- metrics_dir
JOB_METRICS_RE = re.compile(r"mpi_pstate_job_([0-9]{1,10})\.prom")
QUEUE_METRICS_FILE = "mpi_pstate_queue.prom"
NODE_METRICS_FILE = "mpi_pstate_node.prom"


def job_metrics_file(job: int) -> str:
    return f"mpi_pstate_job_{job}.prom"


# ---- Slurm's job cgroups on a node
CGROUP_ROOT = "/sys/fs/cgroup"
# job_<id> directories of slurmstepd (cgroup v2: <name>slurmstepd.scope,
# one per slurmd; v1: <controller>/slurm[_<node>]/uid_<uid>/)
CGROUP_GLOBS = ("system.slice/*slurmstepd.scope/job_*", "*/slurm*/uid_*/job_*")
CGROUP_JOB_RE = re.compile(r"job_([0-9]{1,10})")

# ---- the node's calibration
DEFAULT_MODEL = "/var/lib/mpi-pstate/model.json"
KNEE_FILE = "knee_khz"  # beside the model
AGENT_KNEE_FILE = agent_default("knee-file") or ""  # the agent's --knee-file default

# ---- a profile directory (mpi-pstate exec --profile; preload/profile.c)
RANK_PROFILE_GLOB = "rank-*.json"
RANK_PROFILE_RE = re.compile(r"rank-(-?\d+)\.json$")
