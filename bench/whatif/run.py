#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Validation of `mpi-pstate report --what-if` on the local cluster.

The fake hardware's power model is known (tests/cluster/fakesys.py, load
"proc": a CPU draws core_dyn_w * (f/fmax)^2 while a task of its node runs
or waits polling on it).  This script

  1. switches both nodes' fakes to that model,
  2. runs `mpi-pstate calibrate` inside n1 (the model goes to the default
     path, where the node Epilogs embed it into their records),
  3. runs every workload in profile mode and in on mode, alternating
     (A B A B ...), as the test user,
  4. predicts each on run from the profile run of the same repetition
     (`mpi-pstate report PROFILE_JOB --what-if --threshold T --json`) and
     compares with the measured energy difference of the two runs,

then prints a Markdown table (and --json everything).  Run it as root under
the lab's lock with this build installed:

  flock -o /run/mpi-pstate-lab.lock bench/whatif/run.py --reps 3

--levers efficient,uncore checks each lever's own prediction ("levers" of
the same report) the same way: the fakes get the knee power model and the
uncore term as well, and per repetition a profile run is followed by two on
runs, without and with the lever, in alternating order; the lever's
measured saving is their difference at equal duration.

The fakes are put back to their defaults, and the model file and the knee
file calibrate writes beside it put back as they were found, at the end
(--keep-model keeps them)."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Optional, Sequence

TOP = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(TOP / "tests" / "integration"), str(TOP / "epilog")]
import labtools as lt  # noqa: E402

from mpi_pstate.core import layout  # noqa: E402
from mpi_pstate.model import summary as summ  # noqa: E402
from mpi_pstate.model import whatif  # noqa: E402

MODEL = layout.DEFAULT_MODEL
# calibrate writes the knee beside the model; the agent's --low efficient
# reads it there (the default model path's directory)
KNEE = Path(MODEL).parent / layout.KNEE_FILE


class Lever(NamedTuple):
    """A lever beyond the core cap, as the lever's run differs from the
    plain on run: its sbatch options, the site's plugstack keys, its ranks
    per node and their binding (the same for every run of the lever), and
    the fake hardware it needs (flavour keys)."""
    name: str
    sbatch: tuple[str, ...]
    site: tuple[str, ...]
    ntasks: int
    bind: str
    flavour: dict[str, Any]


LEVERS = {
    # --mpi-pstate-low=efficient: calibrate's knee (the lab's acpi-cpufreq
    # names no lowest nonlinear frequency), the fake's knee power model
    "efficient": Lever("efficient", ("--mpi-pstate-low=efficient",), (), 1, "none",
                       {"knee": True}),
    # uncore=yes: only a package the step owns whole, so two ranks per node,
    # each pinned to its CPU: a rank free to run on both CPUs is taken for a
    # hybrid rank waiting on one core, whose wait never counts for the
    # package (docs/agent.md, "Uncore")
    "uncore": Lever("uncore", (), ("uncore=yes",), 2, "cores", {"uncore": {}}),
}


def fake_load(on: bool, restart: bool = False, **keys: Any) -> None:
    """Both nodes' fakes to load "proc" and the flavour keys given (or back
    to their defaults).  A fake started from a checkout without the load
    model is restarted (--restart)."""
    for n in ("n1", "n2"):
        if on:
            lt.flavour(n, load="proc", **keys)
        else:
            lt.lab("flavour", n)
    if not on:
        return
    for n in ("n1", "n2"):
        resets = [l for l in lt.write_log(n) if " reset " in l]
        if not resets or "load=proc" not in resets[-1]:
            if not restart:
                raise SystemExit(f"node {n}'s fake hardware has no load model (started from an "
                                 "older checkout): give --restart to restart the lab from this "
                                 "one")
            lt.lab("restart", timeout=600)
            return fake_load(True, False, **keys)


def calibrate(node: str, seconds: float, reps: int, points: int) -> dict[str, Any]:
    cli = lt.installed().cli
    r = lt.node_exec(node, f"{cli} calibrate --seconds {seconds} --reps {reps} --points "
                           f"{points} --quiet --json")
    return json.loads(r.stdout[:r.stdout.rindex("}") + 1])


@contextlib.contextmanager
def model_files_kept(keep: bool) -> Iterator[None]:
    """The model file and the knee file as found before (absent: removed),
    whatever calibrate wrote meanwhile; keep: left as calibrate wrote them."""
    found = {p: p.read_bytes() if p.exists() else None for p in (Path(MODEL), KNEE)}
    try:
        yield
    finally:
        for p, data in found.items():
            if keep:
                continue
            if data is None:
                p.unlink(missing_ok=True)
            else:
                tmp = p.with_name(f".{p.name}.bench")
                tmp.write_bytes(data)
                os.chmod(tmp, 0o644)
                os.replace(tmp, p)


def check_levers(model: dict[str, Any], levers: Sequence[Lever]) -> None:
    """What the levers need from the calibrated model, or an exit that says
    why: a fake without the knee model has no knee above its lowest point
    (a lab started from an older checkout: --restart)."""
    lowest = model["points"][0]["khz"]
    if any(lv.name == "efficient" for lv in levers) and \
            (model.get("knee_khz") or lowest) <= lowest:
        raise SystemExit("calibrate found no knee above the lowest frequency: is the lab's "
                         "fake from a checkout without the knee model? (--restart)")
    if any(lv.name == "uncore" for lv in levers) and "uncore" not in model:
        raise SystemExit("calibrate measured no uncore: is the lab's fake from a checkout "
                         "without the uncore tree? (--restart)")


def program() -> str:
    """The imbalance program of the MPI family srun can start on this release
    (Open MPI over mpi/pmix, else MPICH over mpi/pmi2: labtools.srun_family)."""
    return f"imbalance.{lt.srun_family()[0]}"


def submit(wd: Path, mode: str, threshold: Optional[str], command: str, nodes: int,
           ntasks: int, extra: Sequence[str] = (), bind: str = "none") -> int:
    # Placement as in profile mode (unbound) for both runs: the lab's two nodes
    # share this VM's CPUs, and pinning gives each node's one rank its first
    # core, the same CPU 0 for both, where two polling ranks took hpcc from
    # 2-3 s to 38-40 s at any threshold (2026-11-26): the comparison measured
    # the lab, not the prediction.  On real nodes pinning costs nothing here.
    # (bind: "cores" where a lever needs its ranks pinned.)
    opt = [f"--mpi-pstate={mode}", f"--mpi-pstate-bind={bind}"] + \
        ([f"--mpi-pstate-threshold={threshold}"] if threshold else []) + list(extra)
    return lt.sbatch(["-N", str(nodes), f"--ntasks-per-node={ntasks}", "-t", "10",
                      "--exclusive", *opt], f"srun --mpi={lt.srun_family()[1]} {command}\n", wd)


def figures(job: int, timeout: float = 60) -> dict[str, Any]:
    """The job's accounting summary, once EpilogSlurmctld wrote it."""
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        hit = summ.find(lt.job_field(job, "SystemComment"))[0]
        if hit:
            s = summ.normalize(hit)
            # per node: joules and the agent's own interval (what the joules cover)
            nodes = {}
            uncore_s = 0.0  # the agent's time with an uncore down, over every package
            det = json.loads((lt.LAB / "records" / str(job) / "job.json").read_text())
            for n, v in det["nodes"].items():
                secs = sum((st.get("agent") or {}).get("elapsed_s") or 0
                           for st in v.get("steps") or [])
                nodes[n] = {"joules": (v.get("energy") or {}).get("joules"), "seconds": secs}
                uncore_s += sum(u.get("down_s") or 0.0 for st in v.get("steps") or []
                                for u in (st.get("agent") or {}).get("uncore") or [])
            return {"job": job, "energy_j": s.get("energy_j"), "energy": s.get("energy"),
                    "wall_s": s.get("wall_s"), "step_wall_s": s.get("step_wall_s"),
                    "down_s": s.get("down_s"), "transitions": s.get("transitions"),
                    "mpi_s": s.get("mpi_s"), "nodes": nodes, "saved_j": s.get("saved_j"),
                    "saved_src": s.get("saved_src"), "uncore_down_s": uncore_s}
        time.sleep(0.3)
    raise AssertionError(f"job {job}: no mpi-pstate summary after {timeout} s")


def saved_at_equal_time(prof: dict[str, Any], on: dict[str, Any]) -> Optional[float]:
    """Profile minus on energy, node by node, with the on run's energy scaled
    to the profile run's duration.  A lowered core on the fake computes as
    fast as ever, so any difference in duration between the two runs is the
    shared machine's noise, not the tool's: compare mean power."""
    tot = 0.0
    for n, p in prof["nodes"].items():
        o = on["nodes"].get(n)
        if not o or not p["joules"] or not o["joules"] or not p["seconds"] or not o["seconds"]:
            return None
        tot += p["joules"] - o["joules"] * p["seconds"] / o["seconds"]
    return tot


def predict(job: int, threshold_us: int) -> dict[str, Any]:
    r = lt.as_user([str(lt.installed().cli), "report", str(job), "--what-if", "--threshold",
                    f"{threshold_us}us", "--json"], check=True)
    return json.loads(r.stdout)["jobs"][0]["what_if"]


def run_job(wd: Path, mode: str, threshold: Optional[str], command: str, nodes: int,
            ntasks: int, extra: Sequence[str] = (), site: Sequence[str] = (),
            bind: str = "none") -> tuple[int, str, dict[str, Any]]:
    """One job to its end: (job, state, figures).  site: plugstack keys for
    this job alone (every step reads the line as it starts; it is put back
    once the job's epilogs are done)."""
    with lt.plugstack_args(*site) if site else contextlib.nullcontext():
        job = submit(wd, mode, threshold, command, nodes, ntasks, extra, bind)
        state = lt.wait_job(job, 300)
        return job, state, figures(job)


def run_workload(name: str, command: str, thresholds: list[int], reps: int, wd: Path,
                 nodes: int, ntasks: int, say: Any) -> list[dict[str, Any]]:
    """Per threshold and repetition: the profile run, the on run, the
    prediction from that profile run and the measured difference."""
    out = []
    for rep in range(reps):
        order = thresholds if rep % 2 == 0 else list(reversed(thresholds))
        prof_job, state, prof = run_job(wd, "profile", None, command, nodes, ntasks)
        say(f"{name} rep {rep + 1}: profile job {prof_job} {state}: {prof['energy_j']} J, "
            f"{prof['step_wall_s']} s")
        for t in order:
            on_job, state, on = run_job(wd, "on", f"{t}us", command, nodes, ntasks)
            p = predict(prof_job, t)
            raw = raw_difference(prof, on)
            meas = saved_at_equal_time(prof, on)
            say(f"  on @ {t} us job {on_job} {state}: {on['energy_j']} J, {on['step_wall_s']} s,"
                f" down {on['down_s']} s; predicted saved {p['saved_j']} J, down "
                f"{p['clocked_down_s']}; measured {meas} (raw difference {raw})")
            out.append({"workload": name, "rep": rep, "threshold_us": t, "profile": prof,
                        "on": on, "predicted": p, "measured_saved_j": meas,
                        "raw_difference_j": raw})
            # the next on run compares with a profile run just before it
            if t != order[-1]:
                prof_job, _, prof = run_job(wd, "profile", None, command, nodes, ntasks)
    return out


def raw_difference(a: dict[str, Any], b: dict[str, Any]) -> Optional[float]:
    """a's energy less b's, as measured (not at equal duration)."""
    return a["energy_j"] - b["energy_j"] if a["energy_j"] is not None and \
        b["energy_j"] is not None else None


def run_lever(lever: Lever, name: str, command: str, thresholds: list[int], reps: int,
              wd: Path, say: Any) -> list[dict[str, Any]]:
    """Per threshold and repetition: a profile run, then the on run without
    the lever and the on run with it, in alternating order (A B, then B A);
    the lever's prediction from that profile run ("levers" of the report)
    against the difference of the two on runs at equal duration.  A row
    keeps run.py's shape: "base" is the reference the saving is measured
    against (the profile run for the core lever)."""
    out = []
    for rep in range(reps):
        order = thresholds if rep % 2 == 0 else list(reversed(thresholds))
        for i, t in enumerate(order):
            prof_job, state, prof = run_job(wd, "profile", None, command, 2, lever.ntasks,
                                            bind=lever.bind)
            p = predict(prof_job, t)
            lv = p["levers"][lever.name]
            say(f"{name} rep {rep + 1}: profile job {prof_job} {state}; predicted "
                + (f"{lv['saved_j']} J" if lv["predicted"] else f"nothing ({lv['why']})"))
            sides = [("base", ()), ("on", lever.sbatch)]
            if (rep + i) % 2:
                sides.reverse()
            got: dict[str, dict[str, Any]] = {}
            for side, extra in sides:
                job, state, got[side] = run_job(wd, "on", f"{t}us", command, 2, lever.ntasks,
                                                extra, lever.site if side == "on" else (),
                                                lever.bind)
                say(f"  on @ {t} us{'' if side == 'base' else ', ' + lever.name} job {job} "
                    f"{state}: {got[side]['energy_j']} J, {got[side]['step_wall_s']} s, down "
                    f"{got[side]['down_s']} s, uncore down {got[side]['uncore_down_s']:.3f} s")
            if not lv["predicted"]:
                continue
            base, on = got["base"], got["on"]
            meas = saved_at_equal_time(base, on)
            say(f"  measured {meas} (raw difference {raw_difference(base, on)})")
            low = lv["low_s"] if lever.name == "uncore" else p["clocked_down_s"]
            out.append({"workload": name, "lever": lever.name, "rep": rep, "threshold_us": t,
                        "profile": prof, "base": base, "on": on,
                        "predicted": {"saved_j": lv["saved_j"], "clocked_down_s": low,
                                      "lever": lv},
                        "measured_down_s": on["uncore_down_s"] if lever.name == "uncore"
                        else on["down_s"],
                        "measured_saved_j": meas, "raw_difference_j": raw_difference(base, on)})
    return out


def base(r: dict[str, Any]) -> dict[str, Any]:
    """The run a row's saving is measured against: the plain on run for a
    lever, the profile run for the core cap."""
    return r.get("base") or r["profile"]


def measure_noise_j(r: dict[str, Any], step_w: float) -> float:
    """The measurement's own uncertainty: the two runs' difference in
    duration (the shared VM's noise) priced at the model's busy-wait power
    step, node by node (the scaling to equal time counts it as saved)."""
    return step_w * max((abs(p["seconds"] - r["on"]["nodes"].get(n, p)["seconds"])
                         for n, p in base(r)["nodes"].items()), default=0.0)


def inside_range(r: dict[str, Any], step_w: float) -> bool:
    """The run's measured saving lies in its predicted range, widened by the
    measurement's own uncertainty."""
    if r["measured_saved_j"] is None:
        return False
    _, lo, hi = r["predicted"]["saved_j"]
    noise = measure_noise_j(r, step_w)
    return lo - noise <= r["measured_saved_j"] <= hi + noise


def table(rows: list[dict[str, Any]], step_w: float = 0.0
          ) -> tuple[str, list[dict[str, Any]]]:
    """One line per workload and threshold: medians over the repetitions.
    A run is inside the stated range when its measured saving is, the range
    widened by the measurement's own uncertainty (measure_noise_j)."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["workload"], r["threshold_us"]), []).append(r)
    lines = ["| workload | threshold | runs | predicted saved J (low .. high) | measured saved J "
             "(min .. max) | error on energy saved | error, share of the job's energy | "
             "predicted down s | measured down s | inside stated range | raw difference J | "
             "on run's own estimate J (its summary, after the fact) | its error |",
             "|---|---|---:|---|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    summ_rows = []
    for (w, t), rs in groups.items():
        pe = statistics.median(r["predicted"]["saved_j"][0] for r in rs)
        plo = statistics.median(r["predicted"]["saved_j"][1] for r in rs)
        phi = statistics.median(r["predicted"]["saved_j"][2] for r in rs)
        ms = [r["measured_saved_j"] for r in rs if r["measured_saved_j"] is not None]
        me = statistics.median(ms) if ms else None
        inside = sum(1 for r in rs if inside_range(r, step_w))
        err = (pe - me) / me if me else None
        job_j = statistics.median(base(r)["energy_j"] or 0 for r in rs)
        share = (pe - me) / job_j if me is not None and job_j else None
        pd = statistics.median(r["predicted"]["clocked_down_s"][0] for r in rs)
        md = statistics.median(r.get("measured_down_s", r["on"]["down_s"]) or 0 for r in rs)
        # the on run's own estimate prices the core cap's clocked-down time:
        # not a lever's
        afters = [r["on"]["saved_j"][0] for r in rs if r["on"].get("saved_j") and "lever" not in r]
        ae = statistics.median(afters) if afters else None
        lines.append(f"| {w} | {whatif.duration_text(t)} | {len(rs)} | "
                     f"{pe:.1f} ({plo:.1f} .. {phi:.1f}) | "
                     + (f"{me:.1f} ({min(ms):.1f} .. {max(ms):.1f})" if ms else "-") + " | "
                     + (f"{100 * err:+.1f} %" if err is not None else "-") + " | "
                     + (f"{100 * share:+.1f} %" if share is not None else "-")
                     + f" | {pd:.2f} | {md:.2f} | {inside}/{len(rs)} | "
                     + f"{statistics.median(r['raw_difference_j'] or 0 for r in rs):.1f} | "
                     + (f"{ae:.1f} | " if ae is not None else "- | ")
                     + (f"{100 * (ae - me) / me:+.1f} % |" if ae is not None and me else "- |"))
        summ_rows.append({"workload": w, "threshold_us": t, "runs": len(rs), "predicted": pe,
                          "predicted_lo": plo, "predicted_hi": phi, "measured": me,
                          "error": err, "error_of_job": share, "inside": inside,
                          "after_the_fact": ae})
    return "\n".join(lines) + "\n", summ_rows


def agent_lateness_us(job: int) -> Optional[float]:
    """How late the agent of an on run lowered, on average over every
    lowering of the job (its records' drop_late_ns: sum over count; the
    time lost adds up per lowering, so neither a median nor a mean per
    rank)."""
    det = json.loads((lt.LAB / "records" / str(job) / "job.json").read_text())
    tot = n = 0
    for v in det["nodes"].values():
        for st in v.get("steps") or []:
            for r in (st.get("agent") or {}).get("ranks") or []:
                dl = r.get("drop_late_ns") or {}
                tot += dl.get("sum") or 0
                n += dl.get("count") or 0
    return tot / n / 1000 if n else None


def reanalyse(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same comparison with the agent's real lateness instead of the
    model's: taken from the on runs of the first repetition of each
    workload, applied to the predictions of every repetition (the first
    one included, so the table keeps its runs)."""
    from mpi_pstate.model import whatif as wi
    late: dict[str, list[float]] = {}
    for r in rows:
        x = agent_lateness_us(r["on"]["job"]) if r["rep"] == 0 else None
        if x is not None:
            late.setdefault(r["workload"].split(",")[0], []).append(x)
    out = []
    for r in rows:
        lat = late.get(r["workload"].split(",")[0])
        if not lat:
            continue
        react = statistics.mean(lat)
        d = json.loads((lt.LAB / "records" / str(r["profile"]["job"]) / "job.json").read_text())
        p = wi.predict(d, None, r["threshold_us"], reaction_us=react)
        out.append(dict(r, predicted=p, reaction_us=react))
    return out


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--iters", type=int, default=100, help="imbalance iterations")
    ap.add_argument("--work-ms", type=float, default=50.0)
    ap.add_argument("--thresholds", default="500,20000",
                    help="us, comma-separated, for the imbalanced demo")
    ap.add_argument("--sweep", default="100,2000,20000,45000",
                    help="us: the threshold sweep (empty: none)")
    ap.add_argument("--spread", default="500,2000,10000,45000",
                    help="us: thresholds for the demo with waits of every length (rank 0's work "
                         "log-uniform in 0.5-200 ms, the same in every run; empty: none)")
    ap.add_argument("--short-spread", default="",
                    help="us: thresholds for waits of 0.2-20 ms (rank 0's work log-uniform in "
                         "0.2-20 ms, 300 iterations, the same in every run; bench/agent's spread "
                         "on real ranks; empty: none)")
    ap.add_argument("--hpcc-n", type=int, default=0, help="also hpcc with this N (0: no)")
    ap.add_argument("--ntasks", type=int, default=1, help="ranks per node (the VM has 2 cores "
                    "for both nodes: more oversubscribes it)")
    ap.add_argument("--agent-budget", metavar="P", help="the site's agent_cpu_budget (percent "
                    "of a core) for every run, set in the lab's plugstack line and put back at "
                    "the end (default: the built-in 0.5)")
    ap.add_argument("--levers", default="core",
                    help="comma-separated, of core (the cap: every workload above), efficient "
                         "(--mpi-pstate-low=efficient), uncore (uncore=yes, 2 ranks per node): "
                         "each lever beyond the cap on the demo at --thresholds and the spread "
                         "at --spread, against the on run without it")
    ap.add_argument("--cal-seconds", type=float, default=1.0)
    ap.add_argument("--restart", action="store_true",
                    help="restart the lab when its fakes lack the load model")
    ap.add_argument("--keep-model", action="store_true",
                    help="leave calibrate's model and knee files (default: as found)")
    ap.add_argument("--json", metavar="PATH", help="write every run as JSON")
    ap.add_argument("--reanalyse", metavar="JSON", help="no runs: the table of a --json file "
                    "again, with the agent's lateness measured in the first repetition's on "
                    "runs as the reaction (the records must still be in the collect dir)")
    return ap


def print_reanalysis(path: Path) -> None:
    """The table of a --json file again, with the agent's measured lateness
    as the reaction (--reanalyse)."""
    doc = json.loads(path.read_text())
    rows = reanalyse([r for r in doc["runs"] if "lever" not in r])
    lat = sorted({round(r["reaction_us"]) for r in rows})
    print(f"Reaction from the agent's records (mean drop lateness of the first "
          f"repetition's on runs): {lat} us\n")
    print(table(rows, power_step_w(doc["model"]))[0])


def say(s: str) -> None:
    print(s, file=sys.stderr, flush=True)


def thresholds(csv: str) -> list[int]:
    return [int(x) for x in csv.split(",") if x]


def commands(a: argparse.Namespace, prog: str) -> tuple[str, str]:
    """The imbalanced demo's command line, and the spread's."""
    return f"./{prog} {a.iters} {a.work_ms:g}", f"./{prog} {a.iters} 10 20"


def run_core(a: argparse.Namespace, names: list[str], prog: str, wd: Path,
             tag: str) -> list[dict[str, Any]]:
    """The core cap's workloads: the demo, the sweep, the spreads and hpcc
    (none unless --levers names core)."""
    rows: list[dict[str, Any]] = []

    def run(what: str, command: str, ths: list[int], reps: int) -> None:
        if ths and "core" in names:
            rows.extend(run_workload(f"{what}{tag}", command, ths, reps, wd, 2, a.ntasks, say))
    cmd, spread = commands(a, prog)
    ths = thresholds(a.thresholds)
    run(f"imbalance 2x{a.ntasks}", cmd, ths, a.reps)
    sw = thresholds(a.sweep)
    run(f"imbalance 2x{a.ntasks}, sweep", cmd, sw, max(1, a.reps - 1))
    sp = thresholds(a.spread)
    run(f"imbalance 2x{a.ntasks}, spread", spread, sp, max(1, a.reps - 1))
    ssp = thresholds(a.short_spread)
    run(f"imbalance 2x{a.ntasks}, spread 0.2-20 ms", f"./{prog} 300 2 10", ssp, a.reps)
    if a.hpcc_n and "core" in names:
        sys.path.insert(0, str(TOP / "bench" / "eval"))
        import evaluate as ld  # the evaluation tool's hpcc input
        (wd / "hpccinf.txt").write_text(ld.hpccinf(ld.HPCC_TEMPLATE.read_text(), a.hpcc_n,
                                                   *ld.process_grid(2 * a.ntasks)))
        os.chown(wd / "hpccinf.txt", *lt_ids())
        run(f"hpcc 2x{a.ntasks}", "hpcc", ths, a.reps)
    return rows


def run_levers(a: argparse.Namespace, levers: list[Lever], prog: str, wd: Path,
               tag: str) -> list[dict[str, Any]]:
    """Each lever beyond the cap on the demo at --thresholds and the spread
    at --spread."""
    rows: list[dict[str, Any]] = []
    cmd, spread = commands(a, prog)
    ths, sp = thresholds(a.thresholds), thresholds(a.spread)
    for lv in levers:
        for what, command, lths in (("", cmd, ths), (", spread", spread, sp)):
            if lths:
                rows.extend(run_lever(lv, f"{lv.name}, imbalance 2x{lv.ntasks}{what}{tag}",
                                      command, lths, a.reps, wd, say))
    return rows


def measure(a: argparse.Namespace, names: list[str], levers: list[Lever], prog: str,
            wd: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Calibrates and runs every workload asked for, with the fakes on the
    load model and the site's agent budget, both put back after; returns
    the runs and the model."""
    flavour: dict[str, Any] = {}
    for lv in levers:
        flavour.update(lv.flavour)
    tag = f", budget {a.agent_budget} %" if a.agent_budget else ""
    site = [f"agent_cpu_budget={a.agent_budget}"] if a.agent_budget else []
    with lt.plugstack_args(*site), model_files_kept(a.keep_model):
        try:
            fake_load(True, a.restart, **flavour)
            model = calibrate("n1", a.cal_seconds, 2, 2)
            say(f"calibrated: {json.dumps(model['points'])} idle {model['idle_w']} W, noise "
                f"{model['noise_w']} W, write {model['transition']['write_us']} us, knee "
                f"{model.get('knee_khz')}, uncore {json.dumps(model.get('uncore'))}")
            check_levers(model, levers)
            rows = run_core(a, names, prog, wd, tag)
            rows += run_levers(a, levers, prog, wd, tag)
        finally:
            fake_load(False)
    return rows, model


def print_results(rows: list[dict[str, Any]], model: dict[str, Any], t0: float,
                  json_path: Optional[str]) -> None:
    text, summ_rows = table(rows, power_step_w(model))
    print(f"Measured {time.strftime('%Y-%m-%d %H:%M', time.gmtime(t0))}-"
          f"{time.strftime('%H:%M', time.gmtime())} UTC; model: {json.dumps(model['points'])}, "
          f"idle {model['idle_w']} W, noise {model['noise_w']} W"
          + (f", knee {model['knee_khz']} kHz" if model.get("knee_khz") else "")
          + (f", uncore poll step {model['uncore']['poll_w_at_max']:.2f} - "
             f"{model['uncore']['poll_w_at_min']:.2f} W" if model.get("uncore") else "") + "\n")
    print(text)
    if json_path:
        Path(json_path).write_text(json.dumps({"model": model, "runs": rows, "table": summ_rows},
                                              indent=1))


def main() -> int:
    ap = parser()
    a = ap.parse_args()
    if a.reanalyse:
        print_reanalysis(Path(a.reanalyse))
        return 0
    names = [x for x in a.levers.split(",") if x]
    if not names or set(names) - {"core", *LEVERS}:
        ap.error(f"--levers: of core, {', '.join(LEVERS)}")
    levers = [LEVERS[n] for n in LEVERS if n in names]
    wd = lt.workdir("whatif-bench")
    prog = program()
    lt.give(lt.BUILD / "tests" / "mpi" / prog, wd)
    t0 = time.time()
    rows, model = measure(a, names, levers, prog, wd)
    print_results(rows, model, t0, a.json)
    return 0


def power_step_w(model: dict[str, Any]) -> float:
    """Polling power at the highest minus at the lowest calibrated point."""
    pts = sorted(model["points"], key=lambda p: p["khz"])
    return pts[-1]["poll_w"] - pts[0]["poll_w"]


def lt_ids() -> tuple[int, int]:
    import pwd
    pw = pwd.getpwnam(lt.TEST_USER)
    return pw.pw_uid, pw.pw_gid


if __name__ == "__main__":
    sys.exit(main())
