# SPDX-License-Identifier: BSD-3-Clause
"""mpi-pstate epilog tooling and the `mpi-pstate` command (Python stdlib only).

Modules:
  parse      strict parsers (the rules of common/parse.h)
  safeio     hostile-safe reading and atomic writing for root code
  config     collect_dir/runtime_dir from the plugin's plugstack line, SlurmUser
  audit      node settings that decide a job's speed (also `mpi-pstate audit`)
  slots      per-rank figures from the shared-memory segments (preload's reader)
  noderec    the node record (node Epilog) and its validation
  summary    merging node records, the bounded accounting summary
  slurm      sacct/scontrol/dbcomment wrappers (argument lists, never a shell)
  report     text, JSON, CSV and SVG output of `mpi-pstate report`
  whatif     `report --what-if`: predicted saving from wait histograms and the node model
  calibrate  `mpi-pstate calibrate`: the node power model (RAPL + cpufreq)
  log        syslog + stderr
  cli        the subcommands

Record formats: docs/records.md.
"""
VERSION = "0.1.0"
