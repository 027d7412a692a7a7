# SPDX-License-Identifier: BSD-3-Clause
# agent/: the node agent mpi-pstate-agent (one per job step per node, root),
# started by the SPANK plugin or by mpi-pstate-exec.  Its pure parts (the
# decision core agent.c, the energy meters rapl.c and energy.c) form the
# agent's archive, which the daemon, its unit tests (tests/unit/agent/), the
# rank simulator of tests/programs/agent/ and bench/agent link; the programs of
# tests/programs/agent/ drive it in the integration tests and benchmarks.
AGENT_CORE_SRCS := agent/agent.c agent/energy.c agent/rapl.c
AGENT_CORE_OBJS := $(AGENT_CORE_SRCS:%.c=$(B)/%.o)
AGENT_LIB := $(B)/libmpi-pstate-agent.a
AGENT_SRCS := $(filter-out $(AGENT_CORE_SRCS),$(sort $(wildcard agent/*.c)))
AGENT_OBJS := $(AGENT_SRCS:%.c=$(B)/%.o)
AGENT_BIN := $(B)/agent/mpi-pstate-agent
AGENT_MAN := man/mpi-pstate-agent.8

$(B)/agent/%.o: agent/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -DMPI_PSTATE_VERSION='"$(VERSION)"' -Iagent -c -o $@ $<

$(AGENT_LIB): $(AGENT_CORE_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

$(AGENT_BIN): $(AGENT_OBJS) $(AGENT_LIB) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(CC) -pie $(LDFLAGS_COMMON) -o $@ $(AGENT_OBJS) $(AGENT_LIB) $(COMMON_LIB) $(COMMON_LIBS) -lpthread

# The archive's unit tests, on fake sysfs trees (tests/unit/fakesys.h).
AGENT_UNIT_BINS := $(patsubst tests/unit/agent/%.c,$(B)/tests/unit/%,$(wildcard tests/unit/agent/test_*.c))
$(AGENT_UNIT_BINS): $(B)/tests/unit/%: tests/unit/agent/%.c $(AGENT_LIB) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -Icommon -Iagent -I$(B)/gen -Itests/unit $(CHECK_CFLAGS) \
	  -DTEST_DATA_DIR='"$(CURDIR)/tests/data"' -o $@ $< $(AGENT_UNIT_OBJS) $(AGENT_LIB) $(COMMON_LIB) \
	  $(CHECK_LIBS) $(COMMON_LIBS) $(TEST_LDFLAGS)
UNIT_BINS += $(AGENT_UNIT_BINS)
# The adversarial test of the hardening runs the daemon's own harden.o.
$(B)/tests/unit/test_harden: $(B)/agent/harden.o
$(B)/tests/unit/test_harden: AGENT_UNIT_OBJS := $(B)/agent/harden.o -lpthread

# Helper programs of the integration tests and benchmarks: a simulator of
# many ranks that follows the slot protocol with the inline functions of
# common/slot.h, and a fake-sysfs tree builder.
AGENT_TEST_DIR := $(B)/tests/agent
AGENT_HELPERS := $(patsubst tests/programs/agent/%.c,$(AGENT_TEST_DIR)/%,$(filter-out tests/programs/agent/probe.c,$(wildcard tests/programs/agent/*.c)))
$(AGENT_TEST_DIR)/%: tests/programs/agent/%.c $(AGENT_LIB) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -Icommon -Iagent -o $@ $< $(AGENT_LIB) $(COMMON_LIB) $(COMMON_LIBS) -lpthread $(TEST_LDFLAGS)

# The adversarial test's agent: the daemon's own objects and a probe run
# inside it once it is confined (tests/programs/agent/probe.c).
AGENT_PROBE := $(AGENT_TEST_DIR)/mpi-pstate-agent-probe
$(AGENT_PROBE): tests/programs/agent/probe.c $(AGENT_OBJS) $(AGENT_LIB) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -Iagent -pie $(LDFLAGS_COMMON) -o $@ $< $(AGENT_OBJS) $(AGENT_LIB) \
	  $(COMMON_LIB) $(COMMON_LIBS) -lpthread
AGENT_HELPERS += $(AGENT_PROBE)

ALL_TARGETS += $(AGENT_BIN)
CHECK_PREREQS += $(AGENT_HELPERS)

install-agent: $(AGENT_BIN)
	install -d $(DESTDIR)$(sbindir) $(DESTDIR)$(mandir)/man8
	install -m 0755 $(AGENT_BIN) $(DESTDIR)$(sbindir)/mpi-pstate-agent
	install -m 0644 $(AGENT_MAN) $(DESTDIR)$(mandir)/man8/mpi-pstate-agent.8
INSTALL_TARGETS += install-agent
UNINSTALL_FILES += $(sbindir)/mpi-pstate-agent $(mandir)/man8/mpi-pstate-agent.8
.PHONY: install-agent agent agent-helpers
agent: $(AGENT_BIN)
agent-helpers: $(AGENT_HELPERS)

# The MPI program of the agent's integration tests, one binary per MPI family.
AGENT_MPI_FAMILIES := $(foreach m,openmpi mpich,$(if $(shell command -v mpicc.$(m)),$(m)))
AGENT_MPI_BINS := $(foreach m,$(AGENT_MPI_FAMILIES),$(AGENT_TEST_DIR)/mpi_phases.$(m))
$(AGENT_TEST_DIR)/mpi_phases.%: tests/programs/agent/mpi/mpi_phases.c
	@mkdir -p $(@D)
	mpicc.$* -O2 -Wall -Wextra -Werror -o $@ $<
CHECK_PREREQS += $(AGENT_MPI_BINS)
agent-helpers: $(AGENT_MPI_BINS)
