# SPDX-License-Identifier: BSD-3-Clause
"""The steps running on this node now, as root reads their runtime
directories: the agent's pid file (root's, bounded), whether that pid is
the agent root trusts, and the domains the running steps' plugin records
list.  Read by the node Epilog's gauges, `mpi-pstate status` and
`calibrate` (which refuses to measure under a running agent)."""
import json
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import layout, safeio


MAX_LIVE_STEPS = 4096  # step directories looked at for the node's gauges
PLUGIN_JSON_MAX = 256 << 10
AGENT_PID_MAX_BYTES = 64
PID_LIMIT = 1 << 22  # the kernel's PID_MAX_LIMIT


def agent_pid(dfd: int) -> int:
    """The pid in a step directory's agent.pid (root's, bounded); ValueError
    when it holds none, FileNotFoundError when no agent was started."""
    raw = safeio.read_file(dfd, layout.AGENT_PID, AGENT_PID_MAX_BYTES, owners={0}).strip()
    if not (raw.isdigit() and len(raw) < 11 and 0 < int(raw) < PID_LIMIT):
        raise ValueError("agent.pid holds no process id")
    return int(raw)


def agent_checker(agent: Optional[str], proc: str = "/proc") -> Callable[[int], bool]:
    """Whether a pid is a running agent: its executable is the agent root
    trusts (a pid file names any process)."""
    exe = os.path.realpath(agent) if agent else None

    def alive(pid: int) -> bool:
        try:
            if exe is None or os.readlink(os.path.join(proc, str(pid), "exe")) != exe:
                return False
        except OSError:
            return False
        return safeio.process_running(pid, proc)
    return alive


def live_step_domains(runtime: str, agent_alive: Callable[[int], bool]
                      ) -> Tuple[int, List[Dict[str, Any]]]:
    """The steps of this node whose agent runs now, and the domains their
    plugin records list."""
    n = 0
    doms = []  # type: List[Dict[str, Any]]
    try:
        sfd = safeio.open_dir(os.path.join(runtime, layout.STEPS_DIR), trusted={0})
    except OSError:
        return n, doms
    try:
        for name in sorted(x for x in os.listdir(sfd) if layout.STEP_DIR_RE.fullmatch(x))[
                :MAX_LIVE_STEPS]:
            try:
                dfd = os.open(name, safeio.O_DIR, dir_fd=sfd)
            except OSError:
                continue
            try:
                if os.fstat(dfd).st_uid != 0:
                    continue
                if not agent_alive(agent_pid(dfd)):
                    continue
                n += 1
                rec = json.loads(safeio.read_file(dfd, layout.PLUGIN_JSON, PLUGIN_JSON_MAX,
                                                  owners={0}).decode())
                listed = rec.get("domains") if isinstance(rec, dict) else None
                doms += [d for d in listed if isinstance(d, dict)] \
                    if isinstance(listed, list) else []
            except (OSError, ValueError):
                continue
            finally:
                os.close(dfd)
    finally:
        os.close(sfd)
    return n, doms
