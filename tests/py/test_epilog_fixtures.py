# SPDX-License-Identifier: BSD-3-Clause
"""Shared fixtures of the epilog suites (test_epilog*.py, test_report*.py),
a fake sysfs tree, segments written through preload's slot module, and
synthetic node records.  Holds no test case (named test_epilog_* only to
live beside the suites that import it)."""
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

TOP = Path(__file__).resolve().parents[2]
if str(TOP / "epilog") not in sys.path:
    sys.path.insert(0, str(TOP / "epilog"))

from mpi_pstate.core import noderecord, segment as slotlib  # noqa: E402


def write(root: Path, rel: str, value: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(value + "\n")


def fake_sysfs(root: Path, ncpus: int = 4, driver: str = "acpi-cpufreq",
               governor: str = "performance", max_khz: int = 3000000, boost: Optional[int] = 1,
               cstates: Tuple[Tuple[str, int], ...] = (("POLL", 0), ("C1", 2), ("C6", 133)),
               disabled: Optional[Dict[int, Set[str]]] = None, smt: int = 1, numa: int = 1,
               uncore: bool = False, rapl: bool = True) -> Path:
    """A sysfs tree with ncpus CPUs, one cpufreq policy each."""
    cpu = "devices/system/cpu"
    write(root, f"{cpu}/online", f"0-{ncpus - 1}")
    write(root, f"{cpu}/present", f"0-{ncpus - 1}")
    write(root, f"{cpu}/offline", "")
    write(root, f"{cpu}/cpuidle/current_driver", "intel_idle")
    write(root, f"{cpu}/cpuidle/current_governor", "menu")
    write(root, f"{cpu}/smt/control", "on" if smt > 1 else "off")
    write(root, f"{cpu}/smt/active", "1" if smt > 1 else "0")
    if boost is not None:
        write(root, f"{cpu}/cpufreq/boost", str(boost))
    for c in range(ncpus):
        if driver:
            pol = f"{cpu}/cpufreq/policy{c}"
            write(root, f"{pol}/scaling_driver", driver)
            write(root, f"{pol}/scaling_governor", governor)
            write(root, f"{pol}/scaling_min_freq", "1200000")
            write(root, f"{pol}/scaling_max_freq", str(max_khz))
            write(root, f"{pol}/cpuinfo_min_freq", "1200000")
            write(root, f"{pol}/cpuinfo_max_freq", "3000000")
            write(root, f"{pol}/related_cpus", str(c))
        for i, (name, lat) in enumerate(cstates):
            d = f"{cpu}/cpu{c}/cpuidle/state{i}"
            write(root, f"{d}/name", name)
            write(root, f"{d}/latency", str(lat))
            write(root, f"{d}/residency", str(lat * 3))
            write(root, f"{d}/disable", "1" if name in (disabled or {}).get(c, set()) else "0")
        sib = ",".join(str(c - c % smt + k) for k in range(smt))
        write(root, f"{cpu}/cpu{c}/topology/thread_siblings_list", sib)
    per = max(1, ncpus // numa)
    for n in range(numa):
        write(root, f"devices/system/node/node{n}/cpulist", f"{n * per}-{n * per + per - 1}")
        write(root, f"devices/system/node/node{n}/distance",
              " ".join("10" if m == n else "21" for m in range(numa)))
    if uncore:
        u = f"{cpu}/intel_uncore_frequency/package_00_die_00"
        write(root, f"{u}/min_freq_khz", "800000")
        write(root, f"{u}/max_freq_khz", "1800000")
        write(root, f"{u}/initial_min_freq_khz", "800000")
        write(root, f"{u}/initial_max_freq_khz", "2400000")
    if rapl:
        write(root, "class/powercap/intel-rapl:0/name", "package-0")
        write(root, "class/powercap/intel-rapl:0/energy_uj", "123456")
    return root


def segment(path: Path, ranks: List[Dict[str, Any]], nslots: Optional[int] = None,
            uid: int = -1) -> None:
    """A segment whose slots hold the given figures (ns/ticks at 1 GHz)."""
    slotlib.create_segment(str(path), nslots or max(1, len(ranks)))
    seg = slotlib.LiveSegment(str(path))
    try:
        for i, r in enumerate(ranks):
            base = slotlib.HEADER_SIZE + i * slotlib.SLOT_SIZE
            fields = {"magic": slotlib.SLOT_MAGIC, "version": slotlib.VERSION,
                      "slot_size": slotlib.SLOT_SIZE, "pid": 1000 + i, "rank": r["rank"],
                      "size": r.get("size", len(ranks)), "local_index": i, "nfuncs": 3,
                      "clock": 2, "ticks_per_sec": 10**9, "mode": 2,
                      "state": slotlib.STATES.index(r.get("state", "finalized")),
                      "cpu": r.get("cpu", i), "app_start_ticks": 10**9,
                      "app_end_ticks": 10**9 + int(r.get("wall", 10.0) * 1e9)
                      if r.get("state", "finalized") != "running" else 0,
                      "threshold_ns": 500000, "abi": 2,
                      "long_calls": r.get("long_calls", 5), "long_ns": int(r.get("wait", 1) * 1e9),
                      "down_ns": int(r.get("down", 0.5) * 1e9),
                      "transitions": r.get("transitions", 7)}
            for k, v in fields.items():
                seg.set_slot_field(i, k, v)
            for j, (name, t) in enumerate((("MPI_Init", 0.2), ("MPI_Barrier", r.get("mpi", 2.0)),
                                           ("MPI_Send", 0.25))):
                fb = base + slotlib.FN_OFFSET + j * slotlib.FN_SIZE
                seg.map[fb:fb + len(name)] = name.encode()
                for k, v in (("calls", 10 + j), ("time_ns", int(t * 1e9)), ("bytes", 8 * j),
                             ("long_calls", j)):
                    off, fmt = slotlib.FN_FIELDS[k]
                    import struct
                    struct.pack_into("<" + fmt, seg.map, fb + off, v)
    finally:
        seg.close()
    if uid != -1:
        os.chown(path, uid, -1)


def rank(node: str, r: int, step: str = "0", wall: float = 10.0, mpi: float = 2.0,
         down: Optional[float] = 0.5, transitions: Optional[int] = 7) -> Dict[str, Any]:
    return {"step": step, "rank": r, "size": 4, "local": r % 2, "cpu": r % 2,
            "state": "finalized", "mode": "on", "abi": "ompi", "threshold_us": 500,
            "wall_s": wall, "mpi_s": mpi, "mpi_share": round(mpi / wall, 4), "wait_s": mpi * 0.9,
            "long_calls": 3, "over_s": mpi * 0.8, "down_s": down, "transitions": transitions,
            "calls": 100, "bytes": 800, "wakeups": 1, "top": [["MPI_Barrier", mpi, 50]]}


def node_record(job: int, node: str, ranks: List[Dict[str, Any]], joules: Optional[float] = 100.0,
                settings: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    infos = [{"step": "0", "plugin": None,
              "agent": {"step": "0", "energy": {"status": "ok", "joules": joules},
                        "record": {"step": 0}}}] if joules is not None else []
    steps = [{"step": "0", "segment": f"mpi-pstate.{job}.0", "slots": len(ranks), "ranks": ranks}]
    st = settings if settings is not None else {
        "cpufreq": {"driver": "acpi-cpufreq", "governors": ["performance"], "boost": True},
        "cstates": {"states": [{"name": "C6", "exit_latency_us": 133, "enabled_cpus": "0-1"}]},
        "smt": {"threads_per_core": 1}, "numa": {"nodes": 1}, "warnings": []}
    return noderecord.build(job, node, 1000, settings=st, steps=steps if ranks else [],
                            infos=infos, restore={"status": "ok"}, problems=[], written=time.time())


def epilog_dirs(tmp: Path) -> Tuple[Path, Path, Path, Path]:
    """(collect_dir, runtime_dir, shm dir, sysroot) of a node Epilog run in
    tmp: collect_dir made as the admin does (a node never creates it; root's
    here, SlurmUser being root without a slurm.conf), the shm directory
    sticky and world-writable like /dev/shm, a fake sysfs."""
    shm = tmp / "shm"
    shm.mkdir(mode=0o1777)
    os.chmod(shm, 0o1777)
    (tmp / "records").mkdir(mode=0o755, exist_ok=True)
    return tmp / "records", tmp / "run", shm, fake_sysfs(tmp / "sys")


def sums_json(d: Path, job: int, step: str, seg: Path, agent: Dict[int, Dict[str, Any]],
              joules: float = 1.0, node: str = "n1") -> Dict[str, Any]:
    """The step's sums.json as the agent writes it as the step ends
    (agent/record.c, docs/agent.md section 10), made here by the Epilog's
    own reduction of the same segment (slots.rank_figures, noderec.rest_add):
    test_epilog_sums.py shows the real agent writes the same figures."""
    from mpi_pstate.site import rankfigures
    _, slot_list = slotlib.read_segment(str(seg))
    rest = noderecord.new_rest()
    noderecord.rest_add(rest, step, [rankfigures.rank_figures(s, step, agent.get(i))
                                     for i, s in enumerate(slot_list) if s], "")
    obj: Dict[str, Any] = {"format": "mpi-pstate-sums", "version": 1, "node": node, "job": job,
                           "step": int(step), "ranks": rest["rank_steps"], "invalid": 0,
                           "transitions": rest["transitions"], "log_errors": 0,
                           "energy": {"status": "ok", "package_j": joules, "dram_j": 0.0}}
    obj.update({k: round(rest[k], 6) for k in noderecord.SUMS_FIGURES})
    (d / "sums.json").write_text(json.dumps(obj))
    return obj


def plugin_json(runtime: Path, job: int, step: str, seg: Optional[Path], nslots: int = 0,
                node: str = "n1", version: int = 2) -> Path:
    """The plugin's step record <runtime>/steps/<job>.<step>/plugin.json
    (root's, 0700 directories): version 2 lists the segment it made by name,
    device and inode, so that root removes only the file the plugin made;
    version 1 has only "shm"."""
    d = runtime / "steps" / f"{job}.{step}"
    d.mkdir(parents=True, exist_ok=True)
    rec: Dict[str, Any] = {"version": version, "job": job, "node": node, "mode": "on",
                           "shm": str(seg) if seg else None}
    if version >= 2:
        rec["segments"] = []
        if seg is not None:
            st = os.stat(seg)
            rec["segments"].append({"name": seg.name, "dir": "/dev/shm", "dev": st.st_dev,
                                    "ino": st.st_ino, "nslots": nslots,
                                    "bytes": slotlib.HEADER_SIZE + nslots * slotlib.SLOT_SIZE,
                                    "uid": st.st_uid})
    (d / "plugin.json").write_text(json.dumps(rec))
    return d
