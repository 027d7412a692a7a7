# SPDX-License-Identifier: BSD-3-Clause
"""What users run, and admins at a shell: the `mpi-pstate` command's
report in every form and its other subcommands, and `mpi-pstate exec`,
which mpirun starts once per rank outside Slurm.  Imports core/, model/
and site/ (backfill finishes a job as the controller would).

  command        the `mpi-pstate` command: report, backfill, audit, calibrate; the rest handed on
  report         `mpi-pstate report`: a job's figures as text, JSON and CSV; step views
  report_svg     `report --svg`: the per-rank chart, the what-if under it
  report_list    list mode (one line per job, sacct's --format) and `--totals`
  report_whatif  `report --what-if`: its options, the prediction per job, its output
  htmlpage       `report --html`: one self-contained page a job
  launcher       `mpi-pstate exec`: a program with the preload library, outside Slurm
"""
