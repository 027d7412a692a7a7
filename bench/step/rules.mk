# SPDX-License-Identifier: BSD-3-Clause
# bench/step/: the plugin's per-step cost.  run.py times srun steps on the
# lab (with and without the plugin); phases.py drives the plugin's hooks
# without Slurm through bench/step/hooks (the unit tests' stub libslurm) and
# splits the time per phase.  `make step-bench` builds and runs the latter.
STEP_BENCH_HOOKS := $(B)/bench/step/hooks
$(STEP_BENCH_HOOKS): bench/step/hooks.c tests/unit/spank/spank_stub.c tests/unit/spank/spank_stub.h
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -Itests/unit/spank -rdynamic -o $@ \
	  bench/step/hooks.c tests/unit/spank/spank_stub.c -ldl $(TEST_LDFLAGS)

step-bench: $(STEP_BENCH_HOOKS) $(SPANK_SO) $(AGENT_BIN) $(PRELOAD_TARGETS)
	$(PYTHON) bench/step/phases.py --build $(B)
.PHONY: step-bench
