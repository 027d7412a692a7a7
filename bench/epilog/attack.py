#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The node Epilog and the EpilogSlurmctld under attack (a job's user writing
hostile segments and records), measured
as the resources of the child process (getrusage: CPU seconds and peak RSS;
never wall clock: the VM is shared).

Attacks, as the job's user (uid 1000) and as another user (uid 65534):
  hardlink  one valid segment of SLOTS slots (all in use) hard-linked under
            NAMES names mpi-pstate.<job>.<n> (the job's user)
  padded    81 zero-padded names mpi-pstate.<job>.00.. made by another user
            in front of the victim's one real segment (its step 9)
  counter   one slot with every counter at 2^64-1 (the job's user)
  header    the segment's header rewritten to claim 16384 slots (the job's user)
  swapped   the listed name replaced by another file of the user's (new inode)
and at scale (thousands of steps), each with the sums.json every step's agent writes
as it ends, and as KIND-nosums without (the agents killed: the Epilog reads
every segment itself, within its CPU bound):
  maximal   16384 slots of valid but maximal content, SLOTS per step
  sweep     NAMES x 100 steps of 16 honest ranks
  sweep10k  10,000 steps of 2 honest ranks
  wide      one step of 16384 honest ranks
and, for the plain cases, a job that had the plugin off (nothing to do) and
big: one honest segment of SLOTS slots, all in use (the largest real load).

Run as root (the Epilog is root's):
    python3 bench/epilog/attack.py [--tree DIR] [--names 16] [--slots 4096] [--json]
--tree: the source tree whose epilog/ is run (default: this one), to measure
another commit side by side (`git worktree add /tmp/before <commit>`).
The library of this tree builds the segments either way."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

HERE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(HERE / "tests" / "py"))
sys.path.insert(0, str(HERE / "epilog"))
import test_epilog_fixtures as fx  # noqa: E402

JOB = 4242
USER = 1000
OTHER = 65534


# Measured from a small intermediate process: a child forked straight from
# this one would count this process's memory (it built a 64 MiB segment) in
# its peak RSS, which exec does not reset.
MEASURE = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execve(sys.argv[1], sys.argv[1:], os.environ)
_, status, ru = os.wait4(pid, 0)
print(json.dumps({"rc": os.waitstatus_to_exitcode(status), "cpu_s": ru.ru_utime + ru.ru_stime,
                  "maxrss_kib": ru.ru_maxrss}))
"""


def child_usage(argv: List[str], env: Dict[str, str]) -> Dict[str, Any]:
    """CPU seconds and peak RSS (MiB) of one child, from wait4's rusage."""
    p = subprocess.run([sys.executable, "-I", "-S", "-c", MEASURE] + argv, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    u = json.loads(p.stdout.decode().strip().splitlines()[-1])
    return {"rc": u["rc"], "cpu_s": round(u["cpu_s"], 3),
            "maxrss_mib": round(u["maxrss_kib"] / 1024, 1),
            "stderr": p.stderr.decode("utf-8", "replace")[-2000:]}


def plugin_json(runtime: Path, step: str, seg: Path, nslots: int, node: str = "n1") -> None:
    """The plugin's step record (version 2, the contract the root
    Epilog trusts): the segment it made, by name and inode."""
    d = runtime / "steps" / f"{JOB}.{step}"
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(runtime / "steps", 0o700)
    os.chmod(d, 0o700)
    st = seg.stat()
    rec = {"version": 2, "job": JOB, "step": int(step) if step.isdigit() else step,
           "node": node, "mode": "on", "shm": str(seg),
           "segments": [{"name": seg.name, "dir": "/dev/shm", "dev": st.st_dev,
                         "ino": st.st_ino, "nslots": nslots,
                         "bytes": 4096 + nslots * 16384, "uid": st.st_uid}]}
    (d / "plugin.json").write_text(json.dumps(rec))


def maximal_slot() -> bytes:
    """One slot with valid but maximal content (the largest an honest rank
    writes): 128
    functions with 31-character names and every counter at 2^53, a full
    cpuset, every histogram bucket at 2^53, every slot counter at 2^53."""
    sl = fx.slotlib
    tmp = Path(tempfile.mkdtemp(prefix="mpi-pstate-slot."))
    try:
        fx.segment(tmp / "s", [{"rank": 0}])
        buf = bytearray((tmp / "s").read_bytes()[sl.HEADER_SIZE:sl.HEADER_SIZE + sl.SLOT_SIZE])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    big = 1 << 53
    import struct
    for f in ("transitions", "long_calls", "wakeups", "long_ns", "over_ns", "down_ns"):
        off, fmt = sl.SLOT_FIELDS[f]
        struct.pack_into("<" + fmt, buf, off, big if f not in ("long_ns", "over_ns", "down_ns")
                         else 10**17)
    struct.pack_into("<I", buf, sl.SLOT_FIELDS["nfuncs"][0], sl.MAX_FUNCS)
    struct.pack_into(f"<{sl.CPUSET_WORDS}Q", buf, sl.CPUSET_OFFSET, *[(1 << 64) - 1] * 16)
    for off in (sl.HIST_BYTES_OFFSET, sl.HIST_NS_OFFSET):
        struct.pack_into(f"<{sl.BUCKETS}Q", buf, off, *[big] * sl.BUCKETS)
    for j in range(sl.MAX_FUNCS):
        fb = sl.FN_OFFSET + j * sl.FN_SIZE
        name = f"MPI_F{j:03d}" + "x" * 23
        buf[fb:fb + sl.NAME_LEN] = name.encode()[:sl.NAME_LEN - 1].ljust(sl.NAME_LEN, b"\0")
        for k in ("calls", "time_ns", "bytes", "long_calls"):
            off, fmt = sl.FN_FIELDS[k]
            struct.pack_into("<" + fmt, buf, fb + off, 10**15 if k == "time_ns" else big)
    assert sl.parse_slot(bytes(buf)) is not None
    return bytes(buf)


def filled_segment(seg: Path, n: int, slot: bytes) -> None:
    """A segment of n slots, each `slot` with its own rank and index."""
    sl = fx.slotlib
    sl.create_segment(str(seg), n)
    import struct
    with open(seg, "r+b") as f:
        for i in range(n):
            b = bytearray(slot)
            struct.pack_into("<i", b, sl.SLOT_FIELDS["rank"][0], i)
            struct.pack_into("<i", b, sl.SLOT_FIELDS["size"][0], n)
            struct.pack_into("<I", b, sl.SLOT_FIELDS["local_index"][0], i)
            f.seek(sl.HEADER_SIZE + i * sl.SLOT_SIZE)
            f.write(b)
    os.chown(seg, USER, -1)


def agent_json(runtime: Path, step: str, n: int) -> List[Dict[str, Any]]:
    """The agent's record of a step: root's figures of every slot."""
    ranks = [{"slot": i, "rank": i, "down_s": 1.5, "transitions": 12} for i in range(n)]
    (runtime / "steps" / f"{JOB}.{step}" / "agent.json").write_text(json.dumps(
        {"format": "mpi-pstate-agent", "version": 1, "job": JOB, "step": int(step),
         "energy": {"status": "ok", "package_j": 10.0, "dram_j": 1.0}, "ranks": ranks}))
    return ranks


def many_steps(tmp: Path, steps: int, per_step: int, slot: bytes, sums: bool = True) -> None:
    """steps segments of per_step slots and root's records of each; sums:
    with the sums.json each agent writes as its step ends (without: the
    agents were killed before, the Epilog reads every segment itself)."""
    runtime, shm = tmp / "run", tmp / "shm"
    from mpi_pstate.core import steprecords
    for s in range(steps):
        seg = shm / f"mpi-pstate.{JOB}.{s}.{s:016x}"
        filled_segment(seg, per_step, slot)
        plugin_json(runtime, str(s), seg, per_step)
        ranks = agent_json(runtime, str(s), per_step)
        if sums:
            fx.sums_json(runtime / "steps" / f"{JOB}.{s}", JOB, str(s), seg,
                         steprecords.agent_ranks(ranks), joules=11.0)


def honest_slot(tmp: Path) -> bytes:
    one = tmp / "one"
    fx.segment(one, [{"rank": 0}])
    slot = one.read_bytes()[fx.slotlib.HEADER_SIZE:]
    one.unlink()
    return slot


def scenario(tmp: Path, kind: str, names: int, slots: int) -> Path:
    runtime, shm = tmp / "run", tmp / "shm"
    for d in (runtime, shm, tmp / "records"):
        d.mkdir(parents=True, exist_ok=True)
    os.chmod(shm, 0o1777)
    if kind == "off":
        return shm
    base, _, nosums = kind.partition("-")
    sums = nosums != "nosums"
    if base == "maximal":  # 16384 maximal slots (the node's bound), SLOTS per step
        many_steps(tmp, max(1, 16384 // slots), slots, maximal_slot(), sums)
        return shm
    if base == "sweep":  # a parameter sweep: NAMES x 100 steps of 16 honest ranks
        many_steps(tmp, names * 100, 16, honest_slot(tmp), sums)
        return shm
    if base == "sweep10k":  # 10,000 steps of 2 honest ranks
        many_steps(tmp, 10000, 2, honest_slot(tmp), sums)
        return shm
    if base == "wide":  # one step of 16384 honest ranks
        many_steps(tmp, 1, 16384, honest_slot(tmp), sums)
        return shm
    n = slots if kind in ("hardlink", "big") else 4
    step = "9" if kind == "padded" else "0"  # padded: the victim's 10th step
    seg = shm / f"mpi-pstate.{JOB}.{step}"
    fx.segment(seg, [{"rank": i} for i in range(n)], nslots=n)
    os.chown(seg, USER, -1)
    if kind == "counter":
        lib = fx.slotlib.LiveSegment(str(seg))
        try:
            for f in ("transitions", "long_calls", "wakeups", "down_ns", "long_ns"):
                lib.set_slot_field(0, f, (1 << 64) - 1)
        finally:
            lib.close()
    plugin_json(runtime, step, seg, n)
    if kind == "header":
        with open(seg, "r+b") as f:
            f.seek(fx.slotlib.HEADER_FIELDS["nslots"][0])
            f.write((16384).to_bytes(4, "little"))
    if kind == "swapped":  # the plugin's inode kept alive elsewhere, so not reused
        os.link(seg, shm / "kept")
        new = shm / "new"
        fx.segment(new, [{"rank": i} for i in range(n)], nslots=n)
        os.chown(new, USER, -1)
        os.rename(new, seg)
    if kind == "hardlink":
        for i in range(1, names):
            os.link(seg, shm / f"mpi-pstate.{JOB}.{i}")
    if kind == "padded":
        for v in range(9):  # 81 names that sort before the victim's step 9
            for width in range(2, 11):
                p = shm / f"mpi-pstate.{JOB}.{v:0{width}d}"
                fx.segment(p, [{"rank": 0}], nslots=1)
                os.chown(p, OTHER, -1)
    return shm


def run_one(tree: Path, kind: str, names: int, slots: int) -> Dict[str, Any]:
    # on tmpfs, as a node's runtime_dir (/run) and segments (/dev/shm) are
    tmp = Path(tempfile.mkdtemp(prefix="mpi-pstate-attack.", dir="/dev/shm"))
    try:
        shm = scenario(tmp, kind, names, slots)
        sysroot = fx.fake_sysfs(tmp / "sys")
        (tmp / "slurm.conf").write_text("SlurmUser=root\n")
        env = {"SLURM_JOB_ID": str(JOB), "SLURMD_NODENAME": "n1", "SLURM_JOB_UID": str(USER),
               "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "MPI_PSTATE_AGENT": "/nonexistent"}
        argv = [sys.executable, "-I", str(tree / "epilog" / "mpi-pstate"), "epilog",
                "--collect-dir", str(tmp / "records"), "--runtime-dir", str(tmp / "run"),
                "--slurm-conf", str(tmp / "slurm.conf"), "--shm-dir", str(shm),
                "--sysroot", str(sysroot)]
        u = child_usage(argv, env)
        u["shm_left"] = len(os.listdir(shm))
        rec = tmp / "records" / str(JOB) / "node.n1.json"
        u["record_bytes"] = rec.stat().st_size if rec.exists() else 0
        if rec.exists():
            r = json.loads(rec.read_text())
            u["record_ranks"] = len(r.get("ranks", []))
            u["record_status"] = r.get("status")
            u["rest"] = {k: r["rest"][k] for k in ("steps", "rank_steps", "unread_steps", "why")
                         } if "rest" in r else None
            u["problems"] = r.get("problems", [])[:4]
        return u
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


MERGE = """
import os, sys, time
sys.path.insert(0, sys.argv[1] + "/epilog"); sys.path.insert(0, sys.argv[1] + "/preload")
try:
    from mpi_pstate.core import collect
    from mpi_pstate.model import summary
except ImportError:  # a tree of the flat layout of earlier releases (--before)
    from mpi_pstate import collect, summary
jfd = os.open(sys.argv[2], os.O_RDONLY | os.O_DIRECTORY)
recs, bad = collect.read_node_records(jfd, 4242, ["n1"], {0})
d = summary.merge(4242, ["n1"], recs, bad, "COMPLETED", "0:0")
print(len(d["ranks"]), summary.encode(d["summary"])[:60], list(bad.values())[:1])
"""


def ctld_merge(tree: Path, nranks: int) -> Dict[str, Any]:
    """The controller's read, validation and merge of one node record of
    nranks ranks (the old node Epilog published 65,536 under the hard-link
    attack), in a child process of the given tree."""
    tmp = Path(tempfile.mkdtemp(prefix="mpi-pstate-merge."))
    try:
        rec = fx.node_record(JOB, "n1", [fx.rank("n1", 0)])
        one = rec["ranks"][0]
        rec["ranks"] = [dict(one, rank=i, step=str(i // 4096)) for i in range(nranks)]
        jd = tmp / str(JOB)
        jd.mkdir()
        data = fx.noderec.encode(rec)
        (jd / "node.n1.json").write_bytes(data)
        u = child_usage([sys.executable, "-I", "-S", "-c", MERGE, str(tree), str(jd)],
                        dict(os.environ))
        u["record_bytes"] = len(data)
        return u
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ctld_queue(tree: Path) -> Dict[str, Any]:
    """The EpilogSlurmctld of this tree: queue the job, start the flusher
    (which finds no record here and stops), return."""
    tmp = Path(tempfile.mkdtemp(prefix="mpi-pstate-ctld."))
    try:
        (tmp / "records").mkdir()
        os.chmod(tmp, 0o755)
        (tmp / "slurm.conf").write_text("SlurmUser=root\n")
        env = {"SLURM_JOB_ID": str(JOB), "SLURM_JOB_NODELIST": "n1", "SLURM_JOB_UID": str(USER),
               "MPI_PSTATE_DBCOMMENT": "/bin/true", "PATH": "/usr/bin:/bin"}
        u = child_usage([sys.executable, "-I", str(tree / "epilog" / "mpi-pstate"),
                         "epilog-slurmctld", "--collect-dir", str(tmp / "records"),
                         "--slurm-conf", str(tmp / "slurm.conf"), "--flush-for", "0",
                         "--wait", "0"], env)
        u["queued"] = (tmp / "records" / ".queue" / f"{JOB}.json").exists()
        time.sleep(0.5)  # the detached flusher: let it finish before the directory goes
        return u
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fast_path() -> Dict[str, Any]:
    """The installed node Epilog for a job the plugin was off for: the
    shell wrapper with its cache, against the Python run it replaces."""
    tmp = Path(tempfile.mkdtemp(prefix="mpi-pstate-fast."))
    node = f"bench{os.getpid()}"
    cache = Path(f"/run/mpi-pstate-epilog.{node}.cache")
    try:
        conf = tmp / "slurm.conf"
        conf.write_text("SlurmUser=root\n")
        os.utime(conf, (1, 1))
        (tmp / "run" / "steps").mkdir(parents=True)
        wrapper = tmp / "mpi-pstate-epilog"
        wrapper.write_text((HERE / "epilog" / "mpi-pstate-epilog.in").read_text()
                           .replace("@BINDIR@", str(HERE / "epilog")))
        wrapper.chmod(0o755)
        env = {"SLURM_JOB_ID": str(JOB), "SLURMD_NODENAME": node, "SLURM_CONF": str(conf),
               "SLURM_JOB_UID": str(USER), "PATH": "/usr/bin:/bin"}
        cache.write_text(f"{tmp / 'run'}\nconf={conf}\n{conf}\n")
        os.utime(cache, (100, 100))
        shell = child_usage(["/bin/sh", str(wrapper)], env)
        cache.unlink()
        python = child_usage([sys.executable, "-I", str(HERE / "epilog" / "mpi-pstate"), "epilog",
                              "--runtime-dir", str(tmp / "run"), "--collect-dir",
                              str(tmp / "records")], env)
        return {"shell": shell, "python": python}
    finally:
        cache.unlink(missing_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)


KIND_TEXT = {
    "off": "plugin off for the job (Python run)",
    "big": "honest segment, SLOTS slots (the largest real load)",
    "counter": "counters at 2^64-1 in one slot (job's user)",
    "header": "header rewritten to 16384 slots (job's user)",
    "swapped": "listed name swapped to another inode (job's user)",
    "padded": "81 zero-padded names (another user)",
    "hardlink": "one SLOTS-slot segment under NAMES names (job's user)",
    "maximal": "16384 maximal valid slots in SLOTS-slot steps (job's user)",
    "sweep": "NAMES x 100 steps of 16 honest ranks",
    "sweep10k": "10,000 steps of 2 honest ranks",
    "wide": "one step of 16384 honest ranks",
}
for _k in ("maximal", "sweep", "sweep10k", "wide"):
    KIND_TEXT[_k + "-nosums"] = KIND_TEXT[_k] + ", no sums.json (agents killed)"
MARK_BEGIN = "<!-- attack.py begin -->"
MARK_END = "<!-- attack.py end -->"


def section(before: Dict[str, Any], after: Dict[str, Any], merges: Dict[str, Any],
            fast: Dict[str, Any], ctld: Dict[str, Any], a: argparse.Namespace) -> str:
    def cell(u: Dict[str, Any]) -> str:
        if not u:
            return "-"
        if not u["record_bytes"]:
            return f"{u['cpu_s']:.2f} s, {u['maxrss_mib']:.0f} MiB, nothing written"
        return (f"{u['cpu_s']:.2f} s, {u['maxrss_mib']:.0f} MiB, "
                f"{u.get('record_ranks') if u.get('record_ranks') is not None else 'no'} ranks, "
                f"record "
                + (f"{u['record_bytes'] / 1e6:.1f} MB" if u["record_bytes"] >= 1e5 else
                   f"{u['record_bytes'] / 1e3:.1f} kB"))
    lines = [MARK_BEGIN, "## Under attack: node Epilog and controller merge, "
             "before and after", "",
             "CPU seconds and peak RSS of the child process (getrusage: the VM is shared, "
             "wall clock means nothing), the node record it published (ranks, size). "
             f"Before: `{a.before_label}`; after: this tree. Reproduce (root):", "",
             f"    git worktree add /tmp/before {a.before_label}   # or git archive",
             f"    python3 bench/epilog/attack.py --names {a.names} --slots {a.slots} "
             "--before /tmp/before --write", "",
             "| node Epilog, attack | before | after |", "|---|---|---|"]
    for k in after:
        lines.append(f"| {KIND_TEXT[k].replace('SLOTS', str(a.slots)).replace('NAMES', str(a.names))}"
                     f" | {cell(before.get(k, {}))} | {cell(after[k])} |")
    lines += ["", "Before, the hard-linked segment counted once per name and the padded "
              "names pushed the victim's segment out of the 64-name window (0 of its 4 "
              "ranks); a counter of 2^64-1 published fine but made the controller refuse the "
              "whole node record. After, only the segment the plugin lists is read (inode, "
              "one link, the plugin's slot count), counters are dropped one by one.", "",
              "| controller: read, validate and merge one node record | before | after |",
              "|---|---|---|"]
    for label, (b, af) in merges.items():
        lines.append(f"| {label} | {b['cpu_s']:.2f} s, {b['maxrss_mib']:.0f} MiB | "
                     f"{af['cpu_s']:.2f} s, {af['maxrss_mib']:.0f} MiB"
                     + (" (refused: over 16 MiB)" if "65536" in label else "") + " |")
    lines += ["", "| node Epilog of a job the plugin was off for | CPU | peak RSS |",
              "|---|---:|---:|",
              f"| installed wrapper, shell fast path (cache fresh) | "
              f"{fast['shell']['cpu_s'] * 1000:.1f} ms | {fast['shell']['maxrss_mib']:.1f} MiB |",
              f"| the Python run it replaces | {fast['python']['cpu_s'] * 1000:.0f} ms | "
              f"{fast['python']['maxrss_mib']:.1f} MiB |", "",
              "", f"EpilogSlurmctld (queue the job, start the flusher, return): "
              f"{ctld['cpu_s'] * 1000:.0f} ms CPU, {ctld['maxrss_mib']:.1f} MiB; it waits for "
              "no node and no slurmdbd, so this is its cost whatever they do (before: it "
              "waited up to 30 s for the node records and 30 s for slurmdbd, holding the job "
              "in COMPLETING; it took 27.5 s under the hard-link attack). Its time "
              "on the lab cluster, slurmdbd down: section \"On the lab cluster\".", MARK_END]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", default=str(HERE))
    ap.add_argument("--names", type=int, default=16)
    ap.add_argument("--slots", type=int, default=4096)
    ap.add_argument("--kinds", default="off,big,counter,header,swapped,padded,hardlink")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--before", help="a tree of the commit before, for --write")
    ap.add_argument("--before-label", default="0a01c68", help=argparse.SUPPRESS)
    ap.add_argument("--write", action="store_true",
                    help="before and after into bench/epilog/RESULTS.md (needs --before)")
    a = ap.parse_args()
    if a.write:
        if not a.before:
            ap.error("--write needs --before")
        kinds = a.kinds.split(",")
        after = {k: run_one(HERE, k, a.names, a.slots) for k in kinds}
        before = {k: run_one(Path(a.before), k, a.names, a.slots) for k in kinds}
        merges = {f"{n} ranks ({'old node Epilog under the hard-link attack' if n == 65536 else 'the most a node record may hold now'})":
                  (ctld_merge(Path(a.before), n), ctld_merge(HERE, n)) for n in (65536, 16384)}
        text = section(before, after, merges, fast_path(), ctld_queue(HERE), a)
        res = HERE / "bench" / "epilog" / "RESULTS.md"
        old = res.read_text()
        if MARK_BEGIN in old:
            old = old[:old.index(MARK_BEGIN)] + old[old.index(MARK_END) + len(MARK_END) + 1:]
        res.write_text(old.rstrip("\n") + "\n\n" + text)
        print(text)
        return 0
    out = {}
    for kind in a.kinds.split(","):
        out[kind] = run_one(Path(a.tree), kind, a.names, a.slots)
        if not a.json:
            u = out[kind]
            print(f"{kind:9s} rc {u['rc']} cpu {u['cpu_s']:.3f} s  maxrss {u['maxrss_mib']} MiB  "
                  f"record {u['record_bytes']} B, {u.get('record_ranks')} ranks, "
                  f"status {u.get('record_status')}, rest {u.get('rest')}, "
                  f"{u['shm_left']} names left in shm", flush=True)
    if a.json:
        print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
