# SPDX-License-Identifier: BSD-3-Clause
"""Per-rank figures of a job on this node, from the shared-memory segments
the ranks wrote (layout: common/slot.h, read with preload's
slot.py, which this module imports rather than copies).

Everything in a segment was written by the job's user: a file is read only
if the plugin's root-owned step record lists it (name, device and inode),
it is a regular file (no symlink) with one link, owned by the job's user or
root, of the size the plugin made; at most the plugin's slot count is read,
one slot at a time; each slot is validated by the preload reader, and a
slot that fails is reported by index, never fatal (docs/security.md,
"Epilog side")."""
import errno
import heapq
import os
import re
import stat
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from ..core import layout, safeio

from ..core import segment

MAX_SEGMENTS = 64  # segments per job and node we read (one per step); more are reported
MAX_SEG_SLOTS = 4096  # slots of a version 1 step record's segment (no nslots given)
MAX_NODE_RANKS = 16384  # slots read per job and node, all steps together (plugin's cap)
MAX_REMOVE = 1 << 20  # segment names one pass collects (the rest: the next pass)
# Life-cycle calls frame the application (kind init/finalize/abort in
# preload/mpi_functions.def): not "time in MPI".
FRAME_FUNCS = frozenset({"MPI_Init", "MPI_Init_thread", "MPI_Finalize", "MPI_Abort"})
TOP_FUNCS = 3
NS_MAX = 10 * 365 * 86400 * 10**9  # a figure above ten years is garbage
COUNT_MAX = 1 << 53  # a counter above it is garbage (and not exact in JSON readers)


def _s(ns: Optional[int]) -> Optional[float]:
    return None if ns is None else round(ns / 1e9, 6)


def _ns(v: int) -> Optional[int]:
    return v if 0 <= v <= NS_MAX else None


def _bucket(ns: int) -> int:
    """mpi_pstate_slot_bucket() of common/slot.h."""
    return min(ns.bit_length(), segment.BUCKETS - 1) if ns > 0 else 0


def _count(v: int, dropped: List[str], name: str) -> Optional[int]:
    """A counter as the user's slot gives it, or None (and its name in
    dropped) when it is beyond any real count: one bad field is dropped,
    never the rank nor the node's record, so a user cannot hide a job's
    figures by writing one absurd value."""
    if 0 <= v <= COUNT_MAX:
        return v
    dropped.append(name)
    return None


def _time(v: int, dropped: List[str], name: str) -> Optional[int]:
    ns = _ns(v)
    if ns is None and v:
        dropped.append(name)
    return ns


_FN_OK = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}").fullmatch


_KIND: Dict[str, int] = {}  # function name -> 0 skipped, 1 life cycle, 2 MPI (cached)


def _kind(name: str) -> int:
    if len(_KIND) >= 4096:
        _KIND.clear()
    k = _KIND[name] = 0 if not _FN_OK(name) else 1 if name in FRAME_FUNCS else 2
    return k


def share(part: Optional[int], whole: Optional[int]) -> Optional[float]:
    """part / whole in [0, 1]: a figure the rank reports may exceed the
    wall time it also reports; no share is ever above one."""
    if not whole or part is None:
        return None
    return round(min(1.0, max(0.0, part / whole)), 4)


def wait_cpu_share(s: Dict[str, Any], dropped: List[str]) -> Optional[float]:
    """CPU time over wall time of the long waits the rank measured
    (docs/preload.md, "Wait mode"), None when it measured none.  The rank
    writes both figures: each is bounded like any time, and a CPU time
    above the wall time (the two clock reads frame slightly different
    spans) reads as one."""
    cpu = _time(s.get("wait_cpu_ns", 0), dropped, "wait_cpu_ns")
    wall = _time(s.get("wait_sampled_ns", 0), dropped, "wait_sampled_ns")
    return share(cpu, wall)


def function_totals(functions: Dict[str, Dict[str, int]], hist: List[int]
                    ) -> Tuple[int, int, int, List[Tuple[int, str, int]]]:
    """(time in MPI in ns, calls, bytes, the TOP_FUNCS functions of most
    time as (time_ns, name, calls)) of a slot's function table.  Names
    that are no function's are skipped; life-cycle calls count as calls
    and bytes but not as time in MPI, and leave hist (the slot's wait
    histogram, changed in place): MPI_Init is no wait to clock down."""
    mpi = calls = nbytes = 0
    top = []
    for name, f in functions.items():
        # the cache looked up here, not through _kind: this loop runs for
        # every function of every rank of the node
        kind = _KIND.get(name)
        if kind is None:
            kind = _kind(name)
        if kind == 0:
            continue
        calls += f["calls"]
        nbytes += f["bytes"]
        if kind == 1:
            if f["calls"]:
                b = _bucket(f["time_ns"] // f["calls"])
                hist[b] = max(0, hist[b] - f["calls"])
            continue
        mpi += f["time_ns"]
        if f["calls"]:
            top.append((f["time_ns"], name, f["calls"]))
    return mpi, calls, nbytes, heapq.nlargest(TOP_FUNCS, top)


def _wall_ns(s: Dict[str, Any], dropped: List[str]) -> Optional[int]:
    """The rank's time from MPI_Init to its end, None without both ends."""
    tps = s["ticks_per_sec"]
    if not (tps and s["app_end_ticks"] > s["app_start_ticks"] > 0):
        return None
    return _time((s["app_end_ticks"] - s["app_start_ticks"]) * 10**9 // tps, dropped, "wall")


def rank_figures(s: Dict[str, Any], step: str,
                 agent: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The node-record entry of one validated slot (docs/records.md).
    Fields out of range are None, named in "dropped".  agent: what the
    agent (root) measured for this slot ({"down_s", "transitions"},
    noderec.agent_ranks()): the clocked-down time and transitions are
    its figures, never the slot's, which the rank can write (a forged
    figure would reach SystemComment); without it they are null."""
    dropped: List[str] = []
    wall = _wall_ns(s, dropped)
    hist = list(s["hist_ns"])
    mpi, calls, nbytes, top = function_totals(s["functions"], hist)
    state = s["state"]
    if state in ("attached", "running"):
        state = "killed"  # the job is over: this rank never reached finalize or exit
    mpi_ns = _time(mpi, dropped, "mpi")
    r = {
        "step": step, "rank": s["rank"], "size": s["size"], "local": s["local_index"],
        "cpu": s["cpu"], "state": state, "mode": s["mode"], "abi": s["abi"],
        "threshold_us": s["threshold_ns"] // 1000 if _ns(s["threshold_ns"]) else None,
        "wall_s": _s(wall), "mpi_s": _s(mpi_ns),
        "mpi_share": share(mpi_ns, wall),
        "wait_s": _s(_time(s["long_ns"], dropped, "long_ns")),
        "long_calls": _count(s["long_calls"], dropped, "long_calls"),
        "over_s": _s(_time(s["over_ns"], dropped, "over_ns")),
        "down_s": (agent or {}).get("down_s"),
        "transitions": (agent or {}).get("transitions"),
        "calls": _count(calls, dropped, "calls"), "bytes": _count(nbytes, dropped, "bytes"),
        "wakeups": _count(s["wakeups"], dropped, "wakeups"),
        # waits the rank announced as predicted long, and how many of those
        # were short: the prediction's accuracy, per rank
        "announced": _count(s.get("announced", 0), dropped, "announced"),
        "mispredicted": _count(s.get("announced_short", 0), dropped, "mispredicted"),
        # how the MPI library was set to wait, and the CPU its waiting thread
        # burnt over the long waits measured: what clocking down can save
        "wait_mode": s.get("wait_mode", "unknown"),
        "wait_cpu_share": wait_cpu_share(s, dropped),
        "top": [[n, _s(_ns(t)), c] for t, n, c in top if 0 <= c <= COUNT_MAX],
        # [bucket, calls]: durations of its MPI calls, for `report --what-if`
        "hist_ns": [[b, c] for b, c in enumerate(hist) if 0 < c <= COUNT_MAX],
    }
    if wall is None:
        r["note"] = "no end time (rank killed or never initialised)"
    if dropped:
        r["dropped"] = dropped
    return r


def _pread_all(fd: int, n: int, off: int) -> bytes:
    out = b""
    while len(out) < n:
        b = os.pread(fd, n - len(out), off + len(out))
        if not b:
            break
        out += b
    return out


SlotSink = Callable[[int, Any], None]


def refusal(st: os.stat_result, seg: Dict[str, Any], uid: int) -> Optional[str]:
    """Why an opened segment is not the one the plugin listed (seg), or
    None: not a regular file, another inode, a second link (a hard link
    of it under another name would count twice), another owner than the
    job's user or root, another size than the plugin gave it."""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if seg["dev"] is not None and (st.st_dev, st.st_ino) != (seg["dev"], seg["ino"]):
        return "not the file the plugin made (device/inode differ)"
    if st.st_nlink != 1:
        return f"{st.st_nlink} links (hard-linked): refused"
    if st.st_uid not in (uid, 0):
        return f"owned by uid {st.st_uid}"
    if seg["bytes"] is not None and st.st_size != seg["bytes"]:
        return f"size {st.st_size}, the plugin made {seg['bytes']}"
    return None


def _slots_to_read(fd: int, seg: Dict[str, Any], size: int, budget: List[int],
                   problems: List[str]) -> Optional[int]:
    """How many slots of the segment to read: the plugin's count (the
    header is the user's and may lie; a version 1 step record gives none,
    and then the header's, bounded by the file's size), at most the node's
    remaining allowance budget[0].  None when the header is unreadable."""
    name = seg["name"]
    try:
        hdr = segment.parse_header(_pread_all(fd, segment.HEADER_SIZE, 0))
    except segment.SlotError as e:
        problems.append(f"segment {name}: {e}")
        return None
    nslots = seg["nslots"]
    if nslots is None:
        nslots = min(hdr["nslots"], MAX_SEG_SLOTS,
                     (size - segment.HEADER_SIZE) // segment.SLOT_SIZE)
    elif hdr["nslots"] != nslots:
        problems.append(f"segment {name}: header says {hdr['nslots']} slots, the plugin "
                        f"made {nslots}: {nslots} read")
    if nslots > budget[0]:
        problems.append(f"segment {name}: {nslots} slots, {budget[0]} left of the node's "
                        f"{MAX_NODE_RANKS}: the rest not read")
        nslots = budget[0]
    return nslots


def _read_slots(fd: int, name: str, nslots: int, budget: List[int], problems: List[str],
                on_slot: SlotSink, cpu_until: Optional[float]) -> int:
    """Hands slots 0 .. nslots - 1 to on_slot one at a time, and takes them
    from budget[0]; once cpu_until (a time.process_time()) is passed, stops
    and spends the whole budget, so no later segment of the node is read.
    Returns the number of slots read."""
    for i in range(nslots):
        if cpu_until is not None and i % 64 == 0 and time.process_time() > cpu_until:
            problems.append(f"segment {name}: CPU budget spent, slots {i}-{nslots - 1} "
                            "not read")
            budget[0] = 0
            return i
        buf = _pread_all(fd, segment.SLOT_SIZE, segment.HEADER_SIZE + i * segment.SLOT_SIZE)
        try:
            on_slot(i, segment.parse_slot(buf, cpuset=False))
        except segment.SlotError as e:
            on_slot(i, e)
    budget[0] -= nslots
    return nslots


def read_listed(dirfd: int, seg: Dict[str, Any], uid: int, budget: List[int],
                problems: List[str], on_slot: SlotSink,
                cpu_until: Optional[float] = None) -> Optional[int]:
    """One segment the plugin listed in its root-owned step record
    (noderec.plugin_segments): opened without following a symlink and
    accepted only if it is that very file (refusal()).  Slots are read
    one at a time and handed to on_slot(index, slot or SlotError)
    (memory: one slot, whatever the segment holds), never more than the
    plugin's nslots nor than budget[0], the node's remaining slot
    allowance.  Returns the number of slots read, or None with the reason
    in problems."""
    name = seg["name"]
    try:
        fd = os.open(name, safeio.O_READ, dir_fd=dirfd)
    except OSError as e:
        why = "is a symlink" if e.errno == errno.ELOOP else e.strerror
        problems.append(f"segment {name}: {why}")
        return None
    try:
        st = os.fstat(fd)
        why = refusal(st, seg, uid)
        if why:
            problems.append(f"segment {name}: {why}")
            return None
        nslots = _slots_to_read(fd, seg, st.st_size, budget, problems)
        if nslots is None:
            return None
        return _read_slots(fd, name, nslots, budget, problems, on_slot, cpu_until)
    except OSError as e:
        problems.append(f"segment {name}: {e.strerror}")
        return None
    finally:
        os.close(fd)


def job_segments(job_id: int, owner_uid: int, listed: List[Dict[str, Any]],
                 shm_dir: str = layout.SHM_DIR, budget: Optional[List[int]] = None,
                 agent: Optional[Dict[int, Dict[str, Any]]] = None,
                 cpu_until: Optional[float] = None,
                 keep: Optional[Callable[[Dict[str, Any]], Any]] = None
                 ) -> Tuple[List[Dict[str, Any]], List[str], List[str]]:
    """(steps, problems, names): per segment {"step", "segment", "slots",
    "ranks"}; problems are one-line reasons; names are the files read.
    listed: the segments the plugin made, from its step records
    ({"step", "name", "dev", "ino", "nslots", "bytes"}); nothing else in
    shm_dir is looked at, so no other user's file can take a place.
    budget: [slots the node may still read] shared by every call of one
    Epilog (MAX_NODE_RANKS when not given; 0 once cpu_until, a
    time.process_time(), is passed); agent: slot index -> the
    agent's figures of that slot (noderec.agent_ranks()), for the first
    segment of the step (the one the agent watched).  Each slot is turned
    into its rank entry as it is read, and that into keep(entry) when
    given (the node Epilog keeps text or sums): no parsed slot is kept."""
    steps: List[Dict[str, Any]] = []
    problems: List[str] = []
    names: List[str] = []
    if not listed:
        return steps, problems, names
    try:
        dfd = safeio.open_dir(shm_dir, trusted={0}, shared=True)
    except OSError as e:
        return steps, [f"{shm_dir}: {e.strerror}"], names
    budget = budget if budget is not None else [MAX_NODE_RANKS]
    try:
        for k, seg in enumerate(listed[:MAX_SEGMENTS]):
            why = skip_reason(seg, job_id, names, budget)
            if why:
                problems.append(why)
                continue
            ranks: List[Dict[str, Any]] = []
            sink = rank_sink(seg["name"], seg["step"], (agent or {}) if k == 0 else {}, ranks,
                             problems, keep)
            got = read_listed(dfd, seg, owner_uid, budget, problems, sink, cpu_until)
            names.append(seg["name"])
            if got is not None:
                steps.append({"step": seg["step"], "segment": seg["name"], "slots": got,
                              "ranks": ranks})
        if len(listed) > MAX_SEGMENTS:
            problems.append(f"{len(listed)} segments listed, only the first {MAX_SEGMENTS} read")
    finally:
        os.close(dfd)
    return steps, problems, names


def skip_reason(seg: Dict[str, Any], job_id: int, names: List[str], budget: List[int]
                ) -> Optional[str]:
    """Why job_segments does not read a listed segment, or None: a name
    that is not one of the job's step (or one already read: names), or the
    node's slot allowance (budget[0]) spent."""
    n, step = seg["name"], seg["step"]
    m = layout.SEGMENT_RE.fullmatch(n)
    if not m or int(m.group(1)) != job_id or m.group(2) != step or n in names:
        return f"segment {noderec_clip(n)}: not a name of job {job_id} step {step}"
    if budget[0] <= 0:
        return f"segment {n}: not read, the node's {MAX_NODE_RANKS} ranks are reached"
    return None


def rank_sink(name: str, step: str, figures: Dict[int, Dict[str, Any]],
              ranks: List[Dict[str, Any]], problems: List[str],
              keep: Optional[Callable[[Dict[str, Any]], Any]]) -> SlotSink:
    """What read_listed hands each slot of one segment to: the slot turned
    into its rank entry, with the agent's figures of that slot index, and
    appended to ranks (as keep(entry) when keep is given); a slot that
    fails validation, or has fields out of range, is a problem by index."""
    def one(i: int, s: Any) -> None:
        if isinstance(s, Exception):
            problems.append(f"segment {name} slot {i}: {s}")
            return
        if s is None:
            return
        try:
            r = rank_figures(s, step, figures.get(i))
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
            problems.append(f"segment {name} slot {i}: {type(e).__name__}")
            return
        if r.get("dropped"):
            problems.append(f"segment {name} slot {i}: out of range, dropped: "
                            f"{','.join(r['dropped'])}")
        ranks.append(keep(r) if keep else r)
    return one


def noderec_clip(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in str(text))[:80]


SCAN_CLOCK_EVERY = 256  # directory entries between two reads of the CPU clock


def scan_names(shm_dir: str = layout.SHM_DIR, jobs: Optional[Set[int]] = None,
               limit: int = MAX_REMOVE, scan_max: Optional[int] = None,
               cpu_until: Optional[float] = None
               ) -> Tuple[Dict[int, List[str]], Optional[str]]:
    """job_names(), and where and why the scan stopped before the
    directory's end ("after N entries, its bound"; None when it got there
    or found `limit` names): past scan_max entries looked at, or once
    cpu_until (a time.process_time()) is reached.  Anyone can fill
    shm_dir (some 1.2 us an entry), so the root node Epilog bounds its
    scan by both."""
    out: Dict[int, List[str]] = {}
    n = 0
    try:
        dfd = safeio.open_dir(shm_dir, trusted={0}, shared=True)
    except OSError:
        return out, None
    try:
        # scandir streams (listdir would hold every name of a directory any
        # user can fill); by the descriptor's /proc path: Python 3.6 scans
        # no descriptor, and the path names the directory already checked
        with os.scandir(f"/proc/self/fd/{dfd}") as it:
            for i, e in enumerate(it):
                if scan_max is not None and i >= scan_max:
                    return out, f"after {i} entries, its bound"
                if cpu_until is not None and i % SCAN_CLOCK_EVERY == 0 and \
                        time.process_time() >= cpu_until:
                    return out, f"after {i} entries, its CPU budget spent"
                m = layout.SEGMENT_RE.fullmatch(e.name)
                if not m:
                    continue
                job = int(m.group(1))
                if jobs is not None and job not in jobs:
                    continue
                out.setdefault(job, []).append(e.name)
                n += 1
                if n >= limit:
                    break
    finally:
        os.close(dfd)
    return out, None


def job_names(shm_dir: str = layout.SHM_DIR, jobs: Optional[Set[int]] = None,
              limit: int = MAX_REMOVE) -> Dict[int, List[str]]:
    """Every segment name in shm_dir, by job (only the jobs in `jobs` when
    given), whatever the plugin listed or the Epilog read: what the node
    Epilog and the node-side prune remove.  At most `limit` names in all
    (the rest is left for the next pass)."""
    return scan_names(shm_dir, jobs, limit)[0]


def remove_segments(job_id: int, names: List[str], shm_dir: str = layout.SHM_DIR) -> int:
    """Unlinks the job's segments (unlink never follows a symlink; only
    names of this job's pattern are touched)."""
    n = 0
    try:
        dfd = safeio.open_dir(shm_dir, trusted={0}, shared=True)
    except OSError:
        return 0
    try:
        for name in names:
            m = layout.SEGMENT_RE.fullmatch(name)
            st = safeio.entry_stat(dfd, name)
            if not m or int(m.group(1)) != job_id or st is None or \
                    not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                continue
            try:
                os.unlink(name, dir_fd=dfd)
                n += 1
            except OSError:
                pass
    finally:
        os.close(dfd)
    return n


def remove_job(job_id: int, shm_dir: str = layout.SHM_DIR, known: Sequence[str] = (),
               scan_max: Optional[int] = None, cpu_until: Optional[float] = None
               ) -> Tuple[int, Optional[str]]:
    """Every segment of the job in shm_dir, read or not (the segments past
    the Epilog's bounds would otherwise stay in tmpfs for ever): the ones
    known by name (the step records list them) first, without a scan,
    then whatever a scan of shm_dir finds within scan_max entries and
    cpu_until (scan_names).  (segments removed, why the scan stopped or
    None)."""
    n = remove_segments(job_id, list(known), shm_dir)
    found, stopped = scan_names(shm_dir, {job_id}, scan_max=scan_max, cpu_until=cpu_until)
    done = set(known)
    n += remove_segments(job_id, [x for x in found.get(job_id, []) if x not in done], shm_dir)
    return n, stopped
