# SPDX-License-Identifier: BSD-3-Clause
"""What users run, and admins at a shell: the `mpi-pstate` command's
report in every form and its other subcommands, and `mpi-pstate exec`,
which mpirun starts once per rank outside Slurm.  Imports core/, model/
and site/ (backfill finishes a job as the controller would).

  command   the `mpi-pstate` command: report, backfill, audit, calibrate; the rest handed on
  report    `mpi-pstate report`: text, JSON, CSV and SVG of jobs, nodes and ranks
  htmlpage  `report --html`: one self-contained page a job
  launcher  `mpi-pstate exec`: a program with the preload library, outside Slurm
"""
