# SPDX-License-Identifier: BSD-3-Clause
# bench/agent/: the node agent's budgets (bench/agent/run.py writes
# bench/agent/RESULTS.md).  `make agent-bench` builds everything and runs it.
AGENT_BENCH_BASELINE := $(B)/bench/agent/baseline
$(AGENT_BENCH_BASELINE): bench/agent/baseline.c $(AGENT_LIB) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -Icommon -Iagent -o $@ $< $(AGENT_LIB) $(COMMON_LIB) $(COMMON_LIBS) $(TEST_LDFLAGS)

agent-bench: $(AGENT_BENCH_BASELINE) $(AGENT_BIN) agent-helpers $(PRELOAD_TARGETS)
	$(PYTHON) bench/agent/run.py --build $(B)
.PHONY: agent-bench
