# SPDX-License-Identifier: BSD-3-Clause
"""The node power model and what it predicts: pure figures from records
and the model file, shared by the controller (the saving priced after the
fact goes into the summary) and the user's report (`--what-if`); and
`mpi-pstate calibrate`, which root runs on an idle node to measure it.
Imports core/ only.

  powermodel    the model file: format, where it is, strict reader, power at a frequency
  whatif        `report --what-if`: predicted saving and time added; the saving after the fact
  whatif_terms  the bounded terms it adds up: a rank's waits, the agent's cost, a node's power
  calibrate     `mpi-pstate calibrate`: what it measures, the model it writes
  instruments   calibrate's meter (RAPL), CPU policy and uncore control, its loads
  carbon        grams of CO2 from joules at the site's carbon_g_per_kwh=
  summary       the accounting summary (SystemComment): merged, priced, encoded, read back
"""
