# SPDX-License-Identifier: BSD-3-Clause
"""mpi-pstate's Python side (standard library only; every module runs on
Python 3.6): the node Epilog and the controller's EpilogSlurmctld, the
timers, and the `mpi-pstate` command.  One subpackage per role, named by
who runs its modules:

  core/   shared pure pieces every role imports: parsers, hostile-safe file
          access, the runtime layout, the site configuration, Slurm's
          commands, the formats of the segment, the node record and the
          accounting summary, the node settings
  model/  the node power model and what it predicts: `mpi-pstate
          calibrate`, `report --what-if`, the saving priced after the fact
          and grams of CO2
  site/   what Slurm, cron and systemd run as root or SlurmUser: the node
          Epilog, `node-prune`, `node-metrics` and `status` on a node; the
          EpilogSlurmctld, `flush` and `prune` on the controller
  user/   what users (and admins at a shell) run: `mpi-pstate report` in
          every form, `backfill`, `audit`, `calibrate`'s command line, and
          `mpi-pstate exec`

A subpackage imports only its own modules and those of the roles below it:
core < model < site < user (agent_args, generated from the C side's
tables, sits with core); tests/py/test_import_graph.py holds that, and that
no module imports itself through others.  The entry script
(epilog/mpi-pstate) sends what Slurm, cron and systemd run to site/entry.py
(node-prune to site/node_prune.py) and `exec` to user/launcher.py, so that
neither loads the report.  Each module's docstring says what it is and who
runs it; the list: docs/CONTRIBUTING.md ("Layout"); the record formats:
docs/records.md."""
VERSION = "0.1.0"
# The role subpackages, lowest first (an upgrade replaces their files:
# site/spool.py's flusher watches them).
SUBPACKAGES = ("core", "model", "site", "user")
