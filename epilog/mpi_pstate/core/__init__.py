# SPDX-License-Identifier: BSD-3-Clause
"""The shared pure pieces: what every role imports (the node Epilog as
root, the controller as SlurmUser, users' commands), so nothing here may
depend on who runs it.  Imports nothing of model/, site/ or user/.

  parse        strict parsers, the rules of common/parse.h
  safeio       hostile-safe reading and atomic writing (common/safeio.h's rules)
  log          one message to syslog and stderr
  layout       where every file is and how it is named: runtime_dir, collect_dir,
               /dev/shm, metrics_dir, the cgroups, the model file
  siteconf     the site's configuration: the plugin's plugstack.conf line, slurm.conf
  plugincheck  is the installed plugin the one this Slurm loads (`audit --plugin`)
  slurm        the Slurm commands run (argument lists, bounded time, strict output)
  audit        the node settings that decide a job's speed, read from sysfs
  segment      the shared-memory segment and slot file layout (common/slot.h)
  noderecord   the node record's format, bounds and strict validation
  steprecords  the step records a node record embeds: agent.json, sums.json, plugin.json
  livesteps    the steps running on this node now: the agents' pid files, their domains
  collect      the collection directory: job directories, node records, job.json
"""
