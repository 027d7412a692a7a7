# SPDX-License-Identifier: BSD-3-Clause
"""mpi-pstate-exec (`mpi-pstate exec`): run a program with the mpi-pstate preload library, outside Slurm.

    mpirun -n 4 mpi-pstate-exec --profile DIR -- ./app ARGS
    mpi-pstate-exec --node-agent --mode on -- mpirun -n 4 ./app ARGS
    mpi-pstate-exec --summary DIR

The launcher only sets the environment (LD_PRELOAD and MPI_PSTATE_*, see
mpi-pstate-preload(7)) and exec()s the program, so it works the same for a
binary, a shell script or an interpreter.  The library picks the backend for
the program's MPI (Open MPI or the MPICH family) at the first MPI call; a
process that never calls MPI is left alone.  Exit status: the program's, or
2 for a usage error, 127 when the program cannot be run.

With --node-agent (one node, e.g. a workstation) the launcher wraps the whole
MPI launch: it starts mpi-pstate-agent for this machine when it can (as root,
or when the user may write the cpufreq files), runs the command with the
agent's segment in MPI_PSTATE_SHM, and stops the agent afterwards, which
restores every core.  When the agent cannot run, it says why once and the
command runs measured only (mode profile).
"""
import argparse
import glob
import json
import os
import pwd
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

from .. import agent_args
from ..core import layout, parse, safeio

# The installation's directories and the entry script's own ("here"), from
# the entry script (epilog/mpi-pstate): set by main().
PATHS: Dict[str, str] = {}
AGENT = "mpi-pstate-agent"
CPUFREQ = "/sys/devices/system/cpu/cpufreq"
FRONT = "libmpi-pstate.so"
MODES = ("off", "on", "profile")
# The name it runs under, in --help and messages: mpi-pstate-exec when
# installed under that name, else the subcommand `mpi-pstate exec` (main()).
PROG = ["mpi-pstate-exec"]
ABIS = ("auto", "ompi", "mpich")


def _root_may_use(path: str, program: bool) -> bool:
    """Root loads or runs only what the plugin would (safeio.trusted_path:
    root's, in directories nobody else may change); a user, anything."""
    if os.geteuid() != 0:
        return True
    try:
        (safeio.trusted_exec if program else safeio.trusted_path)(path)
        return True
    except OSError as e:
        print(f"{PROG[0]}: {e.strerror}: not used as root", file=sys.stderr)
        return False


def _find(env_name: str, candidates: List[str], program: bool) -> Optional[str]:
    """$env_name (for root only from a source checkout: safeio.env_override),
    else the first candidate that exists; as root, only a trusted one."""
    env = safeio.env_override(env_name)
    if os.environ.get(env_name) and env is None:
        print(f"{PROG[0]}: {env_name} ignored: root uses the installed files only",
              file=sys.stderr)
    for c in [env] if env else candidates:
        ok = os.path.isfile(c) and (not program or os.access(c, os.X_OK))
        if ok and _root_may_use(os.path.abspath(c), program):
            return c if env else os.path.realpath(c)
    return None


def find_front() -> Optional[str]:
    """The front library: $MPI_PSTATE_PRELOAD, the installed one, or one beside us."""
    here = PATHS.get("here", ".")
    candidates = [os.path.join(PATHS["libdir"], "mpi-pstate", FRONT)] if "libdir" in PATHS else []
    candidates += [os.path.join(here, FRONT), os.path.join(here, "..", "lib", "mpi-pstate", FRONT)]
    return _find("MPI_PSTATE_PRELOAD", candidates, False)


def find_agent() -> Optional[str]:
    """$MPI_PSTATE_AGENT, the installed agent, or the one of this build tree."""
    here = PATHS.get("here", ".")
    candidates = [os.path.join(PATHS["sbindir"], AGENT)] if "sbindir" in PATHS else []
    candidates += [os.path.join(here, "..", "sbin", AGENT), os.path.join(here, "..", "agent", AGENT)]
    return _find("MPI_PSTATE_AGENT", candidates, True)


def agent_obstacle(mode: str) -> Optional[str]:
    """Why the agent cannot change frequencies here, or None when it can."""
    if mode == "profile":
        return None
    policies = glob.glob(os.path.join(CPUFREQ, "policy*"))
    if not policies:
        return "no cpufreq driver on this machine"
    if os.geteuid() != 0 and not all(os.access(os.path.join(p, "scaling_max_freq"), os.W_OK)
                                     for p in policies):
        return "the cpufreq files are writable by root only"
    return None


def cpulist(cpus: List[int]) -> str:
    out, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            out.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return ",".join(out)


# The plugstack keys (spank/plugstack.c) whose value the plugin passes the
# agent as this entry of common/agent_args.def.
SITE_KEYS = {"mechanism": "mechanism", "freq_min": "freq-min", "agent_cpu_budget": "cpu-budget",
             "uncore": "uncore", "uncore_threshold": "uncore-threshold", "sysroot": "sysroot"}
AGENT_USER = "mpi-pstate"  # the plugin's default agent_user= when the node has it


def canon(typ: str, text: str) -> object:
    """A value of the agent's command line in a form that compares equal to
    the same value written otherwise (10ms and 10000us); ValueError when it
    is not one the agent takes."""
    if typ == "DURATION":
        return parse.duration_us(text)
    if typ == "PERCENT":
        return parse.percent_ppm(text)
    if typ == "FREQ":
        return parse.freq_khz(text)
    if typ == "BOOL":
        return parse.boolean(text)
    return int(text) if text.isdigit() else text


def is_default(typ: str, value: str, default: Optional[str]) -> bool:
    if default is None:
        return False
    try:
        return canon(typ, value) == canon(typ, default)
    except ValueError:
        return False  # the agent refuses it, naming it


def agent_argv(agent: str, values: Dict[str, object], job: Dict[str, str]) -> List[str]:
    """The agent's command line as mpi-pstate exec writes it, from the table
    the plugin writes its own from (common/agent_args.def): every entry the
    plugin always passes, those passed when set (unless the agent's own
    default), exec's own; then every job option by its srun name."""
    argv = [agent]
    for flag, typ, default, passed, _help in agent_args.AGENT_ARGS:
        if passed not in ("ALWAYS", "SET", "EXEC"):
            continue
        if flag not in values:
            if passed == "ALWAYS":
                raise ValueError(f"the agent's --{flag} has no value")
            continue
        v = values[flag]
        if typ == "FLAG":
            argv += [f"--{flag}"] if v else []
        elif v is not None and (passed == "ALWAYS" or not is_default(typ, str(v), default)):
            argv += [f"--{flag}", str(v)]
    for name, key, _typ, _default, _env in agent_args.JOB_OPTIONS:
        argv += [f"--{name}", job[key]]
    return argv


def agent_ids(user: Optional[str]) -> Tuple[str, str]:
    """Whom a root-started agent runs as: agent_user= (a name or uid), else
    the system user mpi-pstate when the node has it, else the agent's own
    default (an unnamed id), as the plugin decides (spank/plugstack.c)."""
    for who in ([user] if user else []) + [AGENT_USER]:
        try:
            p = pwd.getpwuid(int(who)) if who.isdigit() else pwd.getpwnam(who)
        except (KeyError, ValueError):
            continue
        if p.pw_uid and p.pw_gid:
            return str(p.pw_uid), str(p.pw_gid)
    return (agent_args.agent_default("run-uid") or "", agent_args.agent_default("run-gid") or "")


def agent_values(a: argparse.Namespace, workdir: str, site: Dict[str, str],
                 cpus: List[int], shm: str) -> Tuple[Dict[str, object], Dict[str, str]]:
    """What exec passes the agent: the step it makes itself (its segment,
    this machine's CPUs, job 0), the site's settings from the plugin's
    plugstack line as the plugin would pass them, and the job's options
    (the command line, else MPI_PSTATE_*, else the site's default_<key>,
    else the built-in default)."""
    values = {"create": str(len(cpus)), "shm": shm, "uid": str(os.getuid()),
              "gid": str(os.getgid()), "cpus": cpulist(cpus), "job": "0",
              "step": str(os.getpid()), "record": os.path.join(workdir, "agent.json"),
              "log": os.path.join(workdir, "agent.log"),
              "runtime-dir": os.path.join(workdir, "restore"),
              # outside Slurm nobody else set the step's frequencies
              "allow-governor": "yes"}  # type: Dict[str, object]
    for key, flag in SITE_KEYS.items():
        values[flag] = site.get(key, agent_args.agent_default(flag))
    if str(values["freq-min"]).lower() == "none":  # freq_min=none: no floor
        values["freq-min"] = None
    values["run-uid"], values["run-gid"] = agent_ids(site.get("agent_user"))
    if os.geteuid() != 0:
        values["rt-prio"] = "0"
    given = {"mode": a.mode, "threshold": (a.threshold or "").strip() or None}
    job = {}
    for _name, key, _typ, default, env in agent_args.JOB_OPTIONS:
        job[key] = given.get(key) or os.environ.get(env) or site.get("default_" + key) or default
    return values, job


def site_keys() -> Dict[str, str]:
    """The plugin's plugstack keys on this machine ({} when there is none):
    read only when exec starts an agent."""
    from ..core import siteconf
    try:
        return siteconf.load().keys
    except (OSError, ValueError):
        return {}


def start_agent(agent: str, a: argparse.Namespace, workdir: str,
                site: Optional[Dict[str, str]] = None) -> Tuple[Dict[str, str], int]:
    """Starts the node agent with a fresh segment; returns its MPI_PSTATE_* lines and pid."""
    cpus = sorted(os.sched_getaffinity(0))
    shm = f"/dev/shm/mpi-pstate-exec.{os.getuid()}.{os.getpid()}"
    values, job = agent_values(a, workdir, site if site is not None else site_keys(), cpus, shm)
    argv = agent_argv(agent, values, job)
    # Python 3.6: no capture_output= or text= (docs/security.md, "Python 3.6")
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=30)
    got = dict(line.split("=", 1) for line in r.stdout.splitlines() if line.startswith("MPI_PSTATE_"))
    if r.returncode != 0 or "MPI_PSTATE_SHM" not in got or "MPI_PSTATE_AGENT_PID" not in got:
        raise RuntimeError((r.stderr or r.stdout).strip() or f"exit status {r.returncode}")
    return {"MPI_PSTATE_SHM": got["MPI_PSTATE_SHM"]}, int(got["MPI_PSTATE_AGENT_PID"])


def stop_agent(pid: int, seconds: float = 10.0) -> None:
    """SIGTERM makes the agent restore every core and write its record."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)


def run_with_agent(a: argparse.Namespace, cmd: List[str], env: Dict[str, str]) -> int:
    agent = find_agent()
    why = agent_obstacle(a.mode) if agent else f"{AGENT} not found (set MPI_PSTATE_AGENT)"
    workdir = os.path.abspath(a.agent_dir) if a.agent_dir else tempfile.mkdtemp(prefix="mpi-pstate-exec.")
    os.makedirs(workdir, exist_ok=True)
    pid = 0
    if why is None:
        try:
            extra, pid = start_agent(agent, a, workdir)  # type: ignore[arg-type]
            env.update(extra)
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            why = f"{AGENT} did not start: {e}"
    if why is not None:
        print(f"{PROG[0]}: running without the node agent ({why}): measuring only",
              file=sys.stderr)
        env["MPI_PSTATE_MODE"] = "profile"
    try:
        rc = subprocess.call(cmd, env=env)
    except OSError as e:
        print(f"{PROG[0]}: cannot run {cmd[0]}: {e.strerror}", file=sys.stderr)
        rc = 127
    finally:
        if pid:
            stop_agent(pid)
    if pid and a.verbose:
        print(f"{PROG[0]}: agent record {os.path.join(workdir, 'agent.json')}", file=sys.stderr)
    return rc if rc >= 0 else 128 - rc


def build_env(a: argparse.Namespace, front: str, base: Dict[str, str]) -> Dict[str, str]:
    env = dict(base)
    preload = env.get("LD_PRELOAD", "")
    parts = [p for p in re.split(r"[:\s]+", preload) if p]
    if front not in parts:
        env["LD_PRELOAD"] = ":".join([front] + parts)
    env["MPI_PSTATE_MODE"] = a.mode or "profile"
    if a.profile:
        env["MPI_PSTATE_PROFILE_DIR"] = os.path.abspath(a.profile)
    if a.threshold:
        env["MPI_PSTATE_THRESHOLD"] = a.threshold.strip()
    if a.verbose:
        env["MPI_PSTATE_VERBOSE"] = str(min(a.verbose, 2))
    if a.abi and a.abi != "auto":
        env["MPI_PSTATE_ABI"] = a.abi
    return env


def summary(directory: str) -> int:
    files = sorted(glob.glob(os.path.join(directory, layout.RANK_PROFILE_GLOB)),
                   key=lambda p: int(layout.RANK_PROFILE_RE.findall(p)[0]))
    if not files:
        print(f"{PROG[0]}: no {layout.RANK_PROFILE_GLOB} in {directory}", file=sys.stderr)
        return 1
    print(f"{'rank':>5} {'host':<12} {'state':<10} {'wall_s':>10} {'mpi_s':>10} {'mpi%':>6} "
          f"{'calls':>9} {'long':>6}  top function")
    for path in files:
        with open(path, encoding="utf-8") as f:
            r = json.load(f)
        funcs: List[dict] = [x for x in r.get("functions", [])
                             if x["name"] not in ("MPI_Init", "MPI_Init_thread", "MPI_Finalize")]
        top = max(funcs, key=lambda x: x["time_s"], default=None)
        top_s = f"{top['name']} {top['time_s']:.4f}s" if top else "-"
        print(f"{r['rank']:>5} {r['host'][:12]:<12} {r['state']:<10} {r['wall_s']:>10.4f} "
              f"{r['mpi_s']:>10.4f} {100 * r['mpi_share']:>5.1f}% {r['calls']:>9} "
              f"{r['long_calls']:>6}  {top_s}")
    return 0


def prog_name(argv0: str) -> str:
    """mpi-pstate-exec when started under that name (the entry script's
    link), else `mpi-pstate exec`, the subcommand it then is."""
    return "mpi-pstate-exec" if os.path.basename(argv0) == "mpi-pstate-exec" else \
        "mpi-pstate exec"


def main(argv: Optional[List[str]] = None, paths: Optional[Dict[str, str]] = None) -> int:
    PATHS.clear()
    PATHS.update(paths or {})
    PROG[0] = prog_name(sys.argv[0] if sys.argv else "")
    ap = argparse.ArgumentParser(
        prog=PROG[0],
        usage=f"{PROG[0]} [options] [--] PROGRAM [ARGS...]\n"
              f"       {PROG[0]} --summary DIR",
        description="Run PROGRAM with the mpi-pstate preload library (outside Slurm).")
    ap.add_argument("--profile", metavar="DIR",
                    help="write rank-<R>.json and rank-<R>.csv into DIR at MPI_Finalize")
    ap.add_argument("--mode", choices=MODES,
                    help="off, on (publish waits for a node agent) or profile (default)")
    ap.add_argument("--threshold", metavar="DURATION",
                    help="a blocking call longer than this is a long wait (default 500us)")
    ap.add_argument("--abi", choices=ABIS, help="skip MPI detection (default auto)")
    ap.add_argument("-v", "--verbose", action="count", default=0,
                    help="one line per rank at init and finalize (twice: also ABI detection)")
    ap.add_argument("--print-env", action="store_true",
                    help="print the variables it would set, one NAME=VALUE per line, and exit")
    ap.add_argument("--summary", metavar="DIR", help="print a table of DIR's profiles and exit")
    ap.add_argument("--node-agent", action="store_true",
                    help="wrap a whole one-node launch (mpirun ...): start mpi-pstate-agent around it")
    ap.add_argument("--agent-dir", metavar="DIR",
                    help="with --node-agent: where the agent writes agent.json and agent.log")
    ap.add_argument("command", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.summary:
        return summary(a.summary)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd and not a.print_env:
        ap.print_usage(sys.stderr)
        print(f"{PROG[0]}: no PROGRAM given", file=sys.stderr)
        return 2
    if a.threshold is not None:
        try:
            parse.duration_us(a.threshold)  # the library's own parser, mirrored
        except ValueError:
            print(f"{PROG[0]}: invalid --threshold {a.threshold!r}: expected a duration "
                  "such as 500us or 2ms", file=sys.stderr)
            return 2
    if a.node_agent and a.mode is None:
        a.mode = "on"  # the agent is there to clock cores down
    front = find_front()
    if not front:
        print(f"{PROG[0]}: cannot find {FRONT} (set MPI_PSTATE_PRELOAD)", file=sys.stderr)
        return 127
    env = build_env(a, front, dict(os.environ))
    if a.print_env:
        for k in sorted(env):
            if k == "LD_PRELOAD" or k.startswith("MPI_PSTATE_"):
                print(f"{k}={env[k]}")
        return 0
    if a.node_agent:
        return run_with_agent(a, cmd, env)
    try:
        os.execvpe(cmd[0], cmd, env)
    except OSError as e:
        print(f"{PROG[0]}: cannot run {cmd[0]}: {e.strerror}", file=sys.stderr)
        return 127
    return 127  # not reached

