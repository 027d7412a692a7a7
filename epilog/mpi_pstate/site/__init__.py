# SPDX-License-Identifier: BSD-3-Clause
"""What Slurm, cron and systemd run as root or SlurmUser, on the nodes and
on the controller (and `mpi-pstate status`, which an admin runs as root on
a node).  Everything here meets files a user could have planted: reads go
through core/safeio.py, and no failure may fail an Epilog (a failing Epilog
drains the node).  Imports core/ and model/ only.

  entry        the subcommands Slurm, cron and systemd run: parsers and dispatch
  node_epilog  the node Epilog: restore backstop, the job's record of this node, cleanup
  stepscan     the Epilog's reading of the job's steps, within its CPU and memory budgets
  rankfigures  per-rank figures from the job's shared-memory segments, and their removal
  delivery     how a node writes into collect_dir: as SlurmUser, within a deadline
  pending      node records kept on the node until collect_dir takes them
  failcount    the node's restore failures since boot
  node_prune   `mpi-pstate node-prune`: what ended jobs left on a node
  status       `mpi-pstate status`: what mpi-pstate holds on this node now
  metrics      Prometheus textfile metrics of jobs, the queue and the node
  spool        the EpilogSlurmctld's queue, `flush` and `prune` (controller)
  ctld         a job's summary: its node records merged, job.json, the SystemComment
"""
