# SPDX-License-Identifier: BSD-3-Clause
"""Where things are: collect_dir and runtime_dir come from the plugin's own
plugstack.conf line (one source of truth for the plugin, the agent and the
epilogs; keys and defaults as in spank/plugstack.h), SlurmUser from
slurm.conf.  Command-line options override both."""
import glob
import os
import pwd
import re
import struct
from typing import Dict, List, Optional, Tuple

from . import layout, parse, plugincheck, safeio

PATH_MAX = 256  # MPI_PSTATE_CONFIG_PATH_MAX, terminator included
CONF_MAX_BYTES = 1 << 20
# Our plugstack line is found by what the plugin file is, not by its name:
# sites rename plugins (spank_*.so, a version suffix, a wrapper directory).
# The file's plugin_name symbol holds SPANK_PLUGIN(mpi_pstate, ...)'s name
# (read from the ELF file, never loaded); a file we cannot read (a
# controller without the plugin installed) is recognised by a name
# containing mpi_pstate.
PLUGIN_NAME = "mpi_pstate"
PLUGIN_NAME_RE = re.compile(r"mpi[_-]pstate[^/]*\.so$")
PLUGIN_MAX_BYTES = 64 << 20
PLUGIN_DIRS = ("/usr/lib64/slurm", "/usr/lib/slurm")
PUBLISH_TIMEOUT_MIN_US = 1000000  # publish_timeout= below a second is refused (spank/plugstack.c)


class Config:
    """Plain class, not a dataclass: the epilogs run on Python 3.6."""

    def __init__(self, collect_dir: str = layout.COLLECT_DIR,
                 runtime_dir: str = layout.RUNTIME_DIR, slurm_user: str = "root", slurm_conf: str = "/etc/slurm/slurm.conf",
                 agent: Optional[str] = None, plugstack: Optional[str] = None,
                 plugin: Optional[str] = None, problems: Optional[List[str]] = None) -> None:
        self.collect_dir = collect_dir
        self.runtime_dir = runtime_dir
        self.slurm_user = slurm_user
        self.slurm_conf = slurm_conf
        self.agent = agent  # plugstack key agent=: the node agent binary
        self.plugstack = plugstack  # the file holding the plugin line, if found
        self.plugin = plugin  # the plugin file that line loads
        self.problems = problems if problems is not None else []  # type: List[str]
        # Files and directories the settings were resolved from (the node
        # Epilog's fast-path cache is stale once any is newer)
        self.sources = []  # type: List[str]
        # slurm.conf's PrivateData hides jobs: each job's directory in
        # collect_dir is its owner's and the job's user's alone (collect.py)
        self.private_jobs = False
        # carbon_g_per_kwh=: the site's grams of CO2 per kWh and per partition
        self.carbon = (None, {})  # type: Tuple[Optional[float], Dict[str, float]]
        # metrics_dir=: node_exporter's textfile directory, %h unexpanded
        # (metrics.py); None: no metrics
        self.metrics_dir = None  # type: Optional[str]
        # publish_timeout=: how long a node waits for collect_dir in one
        # pass (delivery.py); slurm.conf's EpilogTimeout, else
        # PrologEpilogTimeout, in seconds (None: Slurm waits forever)
        self.publish_timeout_s = 10.0
        self.epilog_timeout_s = None  # type: Optional[float]
        # every key=value of the plugin's plugstack line, as written
        # (mpi-pstate exec passes the agent what the plugin would)
        self.keys = {}  # type: Dict[str, str]

    @property
    def slurm_uid(self) -> int:
        try:
            return pwd.getpwnam(self.slurm_user).pw_uid
        except KeyError:
            return 0


def export_slurm_conf(c: Config) -> None:
    """The Slurm commands we run must read the same slurm.conf as we do
    (EpilogSlurmctld's environment has no SLURM_CONF).  Entry points only."""
    os.environ["SLURM_CONF"] = c.slurm_conf


def check_dir_path(p: str) -> str:
    """The plugin's rule for collect_dir/runtime_dir (docs/admin.md)."""
    if not p.startswith("/") or len(p) >= PATH_MAX or not p.isprintable() or \
            any(c.isspace() for c in p):
        raise ValueError(f"{p!r}: not an absolute printable path without blanks (< {PATH_MAX})")
    parts = p.split("/")[1:]
    if p != "/" and any(c in ("", ".", "..") for c in parts):
        raise ValueError(f"{p!r}: empty, . or .. component")
    return p


def _read_text(path: str, problems: Optional[List[str]] = None) -> Optional[str]:
    """A configuration file: root's (or the caller's own, for a user's
    command), in directories nobody else may change, never through a final
    symlink, never a FIFO (safeio.read_trusted).  Why one is refused goes to
    problems; a missing one is just None."""
    try:
        return safeio.read_trusted(os.path.abspath(path), CONF_MAX_BYTES).decode(
            "utf-8", "replace")
    except FileNotFoundError:
        return None
    except OSError as e:
        if problems is not None:
            problems.append(f"not read: {e.strerror}")
        return None


def _conf_lines(text: str) -> List[str]:
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def slurm_conf_values(path: str, keys: Tuple[str, ...],
                      problems: Optional[List[str]] = None) -> Dict[str, str]:
    """key=value settings of slurm.conf (case-insensitive keys, last wins)."""
    text = _read_text(path, problems)
    found: Dict[str, str] = {}
    if text is None:
        return found
    want = {k.lower(): k for k in keys}
    for line in _conf_lines(text):
        for word in line.split():
            k, sep, v = word.partition("=")
            if sep and k.lower() in want:
                found[want[k.lower()]] = v
    return found


def _plugin_dirs(slurm_conf: str) -> List[str]:
    """Where Slurm resolves a relative plugstack path: PluginDir (a colon
    list) or the distribution's default."""
    vals = slurm_conf_values(slurm_conf, ("PluginDir",))
    dirs = [d for d in vals.get("PluginDir", "").split(":") if d.startswith("/")]
    return dirs or sorted(glob.glob("/usr/lib/*/slurm-wlm")) + list(PLUGIN_DIRS)


def our_plugin(path: str, dirs: List[str]) -> Optional[str]:
    """The file of a plugstack line if it is mpi-pstate's SPANK plugin (the
    path as written when the file cannot be read here), else None."""
    cands = [path] if path.startswith("/") else [os.path.join(d, path) for d in dirs]
    for f in cands:
        try:
            data = safeio.read_trusted(f, PLUGIN_MAX_BYTES)
        except OSError:
            continue
        try:
            return f if plugincheck.plugin_name(data) == PLUGIN_NAME else None
        except (ValueError, struct.error):  # not an ELF64 file: not a plugin
            return None
    return path if PLUGIN_NAME_RE.search(path) else None


PluginLine = Tuple[Optional[str], Optional[List[str]], Optional[str]]


def plugin_line(plugstack: str, depth: int = 0, dirs: Optional[List[str]] = None,
                sources: Optional[List[str]] = None,
                problems: Optional[List[str]] = None) -> PluginLine:
    """The first plugstack line (following `include` globs) that loads
    mpi-pstate's plugin: the plugin file, its arguments, the file the line
    is in.  sources: gets every file read and every include directory;
    problems: why a file was refused."""
    text = _read_text(plugstack, problems)
    if text is None or depth > 4:
        return None, None, None
    if sources is not None:
        sources.append(plugstack)
    dirs = dirs if dirs is not None else list(PLUGIN_DIRS)
    for line in _conf_lines(text):
        words = line.split()
        if words[0].lower() == "include":
            for pattern in words[1:]:
                if not pattern.startswith("/"):
                    pattern = os.path.join(os.path.dirname(plugstack), pattern)
                if sources is not None:
                    sources.append(os.path.dirname(pattern))
                for f in sorted(glob.glob(pattern)):
                    found = plugin_line(f, depth + 1, dirs, sources, problems)
                    if found[1] is not None:
                        return found
            continue
        if words[0] in ("required", "optional") and len(words) >= 2:
            plugin = our_plugin(words[1], dirs)
            if plugin:
                return plugin, words[2:], plugstack
    return None, None, None


# Where Slurm's commands look without SLURM_CONF, then the configless node's
# copy: slurmd keeps what slurmctld sent in its conf-cache and links it as
# /run/slurm/conf (docs/admin.md, "Configless").
SLURM_CONF_PATHS = ("/etc/slurm/slurm.conf", "/run/slurm/conf/slurm.conf")


def default_slurm_conf() -> str:
    for p in SLURM_CONF_PATHS:
        if os.path.isfile(p):
            return p
    return SLURM_CONF_PATHS[0]


def private_jobs(value: str) -> bool:
    """Whether slurm.conf's PrivateData hides a job from other users
    (slurm.conf(5): "jobs"; "all" is no value of it, so not taken)."""
    return "jobs" in {w.strip().lower() for w in value.split(",")}


def load(slurm_conf: Optional[str] = None, collect_dir: Optional[str] = None,
         runtime_dir: Optional[str] = None) -> Config:
    c = Config()
    c.slurm_conf = slurm_conf or os.environ.get("SLURM_CONF") or default_slurm_conf()
    vals = slurm_conf_values(c.slurm_conf, ("SlurmUser", "PlugStackConfig", "PrivateData",
                                            "EpilogTimeout", "PrologEpilogTimeout"), c.problems)
    c.slurm_user = vals.get("SlurmUser", "root")
    c.epilog_timeout_s = epilog_timeout(vals)
    c.private_jobs = private_jobs(vals.get("PrivateData", ""))
    plugstack = vals.get("PlugStackConfig") or os.path.join(os.path.dirname(c.slurm_conf),
                                                            "plugstack.conf")
    c.sources = [c.slurm_conf]
    c.plugin, args, c.plugstack = plugin_line(plugstack, dirs=_plugin_dirs(c.slurm_conf),
                                              sources=c.sources, problems=c.problems)
    if c.plugin:
        c.sources.append(c.plugin)
    c.keys = {k: v for k, sep, v in (w.partition("=") for w in args or []) if sep}
    for word in args or []:
        k, sep, v = word.partition("=")
        if k == "agent" and sep:
            try:
                c.agent = check_dir_path(v)
            except ValueError as e:
                c.problems.append(f"{c.plugstack}: agent: {e}")
        if k == "carbon_g_per_kwh" and sep:
            try:
                c.carbon = parse.carbon(v)
            except ValueError as e:
                c.problems.append(f"{c.plugstack}: carbon_g_per_kwh: {e}")
        if k == "metrics_dir" and sep:
            try:
                c.metrics_dir = check_dir_path(v)
            except ValueError as e:
                c.problems.append(f"{c.plugstack}: metrics_dir: {e}; no metrics")
        if k == "publish_timeout" and sep:
            try:
                us = parse.duration_us(v)
                if us < PUBLISH_TIMEOUT_MIN_US:
                    raise ValueError(f"{v!r} is under a second")
                c.publish_timeout_s = us / 1e6
            except ValueError as e:
                c.problems.append(f"{c.plugstack}: publish_timeout: {e}; using "
                                  f"{c.publish_timeout_s:g} s")
        if k in ("collect_dir", "runtime_dir") and sep:
            try:
                setattr(c, k, check_dir_path(v))
            except ValueError as e:
                c.problems.append(f"{c.plugstack}: {k}: {e}; using {getattr(c, k)}")
    for k, v in (("collect_dir", collect_dir), ("runtime_dir", runtime_dir)):
        if v:
            setattr(c, k, check_dir_path(v))
    return c


def epilog_timeout(vals: Dict[str, str]) -> Optional[float]:
    """Seconds Slurm gives the Epilog before it kills it and drains the node
    (EpilogTimeout, in releases after 22.05, else PrologEpilogTimeout); None: no limit
    (Slurm's default, and 65534, its "infinite")."""
    for k in ("EpilogTimeout", "PrologEpilogTimeout"):
        v = vals.get(k, "")
        if v.isdigit() and 0 < int(v) < 65534:
            return float(v)
    return None


def expand_host(path: str, host: str) -> str:
    """runtime_dir's "%h" (short host name) and "%%", as spank/paths.c does."""
    if not re.fullmatch(r"[A-Za-z0-9_\-]{1,63}", host):
        raise ValueError(f"host name {host!r} is not a plain name")
    out, i = [], 0
    while i < len(path):
        c = path[i]
        if c == "%":
            nxt = path[i + 1:i + 2]
            if nxt == "h":
                out.append(host)
            elif nxt == "%":
                out.append("%")
            else:
                raise ValueError(f"{path!r}: unknown %-sequence")
            i += 2
            continue
        out.append(c)
        i += 1
    return check_dir_path("".join(out))


def short_host() -> str:
    import socket
    return socket.gethostname().split(".", 1)[0]
