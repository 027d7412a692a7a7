# SPDX-License-Identifier: BSD-3-Clause
# mpi-pstate: top-level build.  Components add their own rules in <dir>/rules.mk;
# shared C code in common/ is built once into one static archive that every
# component links, so no logic exists twice.
.DEFAULT_GOAL := all
SHELL := /bin/bash

VERSION := 0.1.0

prefix      ?= /usr/local
exec_prefix ?= $(prefix)
bindir      ?= $(exec_prefix)/bin
sbindir     ?= $(exec_prefix)/sbin
libdir      ?= $(exec_prefix)/lib
libexecdir  ?= $(exec_prefix)/libexec
datadir     ?= $(prefix)/share
mandir      ?= $(datadir)/man
sysconfdir  ?= /etc
DESTDIR     ?=

TRIPLET := $(shell gcc -print-multiarch 2>/dev/null)
# Which Slurm to build against: SLURM_PREFIX=/opt/slurm (its include/ and
# lib64/ or lib/, as `configure --prefix` installs them); else pkg-config's
# slurm.pc when there is one (SchedMD's slurm-devel has it); else the
# system's headers and libslurm (Debian's libslurm-dev has no slurm.pc).
# The headers are system headers (-isystem): their warnings are not ours.
SLURM_PREFIX ?=
ifneq ($(strip $(SLURM_PREFIX)),)
SLURM_LIBDIR := $(patsubst %/libslurm.so,%,$(firstword $(wildcard $(SLURM_PREFIX)/lib64/libslurm.so \
	$(SLURM_PREFIX)/lib/libslurm.so)))
SLURM_LIBDIR := $(or $(SLURM_LIBDIR),$(SLURM_PREFIX)/lib)
SLURM_CFLAGS := -isystem $(SLURM_PREFIX)/include
# A prefix outside the loader's path is found again at run time (RUNPATH).
SLURM_LIBS := -L$(SLURM_LIBDIR) -Wl,-rpath,$(SLURM_LIBDIR) -lslurm
else ifeq ($(shell pkg-config --exists slurm 2>/dev/null && echo y),y)
SLURM_LIBDIR := $(shell pkg-config --variable=libdir slurm)
SLURM_CFLAGS := $(patsubst -I%,-isystem %,$(shell pkg-config --cflags slurm))
SLURM_LIBS := $(shell pkg-config --libs slurm)
else
SLURM_LIBDIR :=
SLURM_CFLAGS :=
SLURM_LIBS := -lslurm
endif
# Debian installs Slurm plugins under /usr/lib/<triplet>/slurm-wlm; other
# distributions use <libdir>/slurm.  Override with SLURM_PLUGINDIR=...
SLURM_PLUGINDIR ?= $(firstword $(if $(SLURM_LIBDIR),$(SLURM_LIBDIR)/slurm) \
	$(wildcard /usr/lib/$(TRIPLET)/slurm-wlm /usr/lib64/slurm /usr/lib/slurm) $(libdir)/slurm)
PYTHON := /usr/bin/python3

B := build
CC := gcc
# Control-flow protection is per architecture: CET (endbr64 landing pads,
# shadow stack) on x86, BTI landing pads + return-address signing on arm64.
# Other targets get the portable hardening only.
CF_ARCH := $(firstword $(subst -, ,$(shell $(CC) -dumpmachine 2>/dev/null)))
HARDEN_CF_x86_64 := -fcf-protection
HARDEN_CF_aarch64 := -mbranch-protection=standard
# Packagers' and sites' flags (rpmbuild's %optflags, dpkg-buildflags, a
# site's -march) come from the environment or the command line and go after
# the project's own on every compile and link: they may add to the
# hardening or override -O, never drop it.  A _FORTIFY_SOURCE level they set
# is theirs (defining it twice differently is a warning).
CPPFLAGS ?=
CFLAGS ?=
LDFLAGS ?=
USER_CFLAGS := $(CPPFLAGS) $(CFLAGS)
# -Werror is CI's and `make check`'s (they pass WERROR=-Werror), not the
# default build's: a warning that a newer compiler adds must not break a
# site's build of a release.
WERROR ?=
FORTIFY := $(if $(findstring _FORTIFY_SOURCE,$(USER_CFLAGS)),,-D_FORTIFY_SOURCE=2)
HARDEN := $(FORTIFY) -fstack-protector-strong -fstack-clash-protection $(HARDEN_CF_$(CF_ARCH))
WARN := -Wall -Wextra $(WERROR) -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes
CSTD := -std=c11 -D_GNU_SOURCE
OPT ?= -O2 -g
# Every C compile writes its header dependencies beside its output (-MMD -MP;
# read back at the end of this file), so no rule lists headers by hand.
# Only generated headers are named, so that they exist before the first compile.
DEPFLAGS := -MMD -MP
CFLAGS_COMMON := $(CSTD) $(OPT) $(WARN) $(HARDEN) $(DEPFLAGS) -fPIC -fvisibility=hidden -Icommon -I$(B)/gen \
	$(SLURM_CFLAGS) $(USER_CFLAGS)
# Test programs: the same language and warnings, without the product's hardening.
TEST_CFLAGS := $(CSTD) $(OPT) -Wall -Wextra $(WERROR) $(DEPFLAGS) $(SLURM_CFLAGS) $(USER_CFLAGS)
LDFLAGS_COMMON := -Wl,-z,relro -Wl,-z,now -Wl,--as-needed $(CFLAGS) $(LDFLAGS)
# Test programs compile and link in one step (CFLAGS are in TEST_CFLAGS).
TEST_LDFLAGS := $(LDFLAGS)
HWLOC_CFLAGS := $(shell pkg-config --cflags hwloc 2>/dev/null)
HWLOC_LIBS := $(shell pkg-config --libs hwloc 2>/dev/null)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)
COMMON_LIBS := $(HWLOC_LIBS) -lm

ALL_TARGETS :=
INSTALL_TARGETS :=
UNINSTALL_FILES :=
CHECK_PREREQS :=

# ---- common/: one archive, position independent, linked by every component
COMMON_SRCS := $(sort $(wildcard common/*.c))
COMMON_OBJS := $(COMMON_SRCS:%.c=$(B)/%.o)
COMMON_LIB := $(B)/libmpi-pstate-common.a

$(B)/common/%.o: common/%.c | $(B)/common
	$(CC) $(CFLAGS_COMMON) $(HWLOC_CFLAGS) -c -o $@ $<
$(COMMON_LIB): $(COMMON_OBJS)
	rm -f $@ && ar rcs $@ $^
$(B)/common:
	mkdir -p $@
ALL_TARGETS += $(COMMON_LIB)

# ---- tests/unit: the Check suites, one directory a component (common/,
# spank/, agent/, preload/; the shared helpers check_main.h, fakesys.h and
# shortcuts.h beside them), every one built to $(B)/tests/unit/<name>.  Each
# tests/unit/common/test_*.c is one suite of the common archive; the other
# components' suites are built by their own rules.mk.
UNIT_SRCS := $(sort $(wildcard tests/unit/common/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/common/%.c=$(B)/tests/unit/%)
$(B)/tests/unit/%: tests/unit/common/%.c $(COMMON_LIB) | $(B)/tests/unit
	$(CC) $(TEST_CFLAGS) -Icommon -I$(B)/gen -Itests/unit $(HWLOC_CFLAGS) $(CHECK_CFLAGS) \
	  -DTEST_DATA_DIR='"$(CURDIR)/tests/data"' -o $@ $< $(COMMON_LIB) $(CHECK_LIBS) $(COMMON_LIBS) $(TEST_LDFLAGS)
$(B)/tests/unit:
	mkdir -p $@

-include $(sort $(wildcard */rules.mk */*/rules.mk))
-include $(shell find $(B) -name '*.d' 2>/dev/null)

.PHONY: all check check-installed unit install uninstall demo demo-installed deps deps-if-missing clean format lint \
	cluster-start cluster-start-installed cluster-stop print-dirs
all: $(ALL_TARGETS)

unit: $(UNIT_BINS)

# `make check` installs what is missing, builds, and runs every suite; the
# runner prints one closing line "N passed, N failed".
# What this file reads from the machine (pkg-config's flags, Slurm's plugin
# directory) is read when make starts, so on a fresh machine the packages come
# first and a second make, which sees them, builds: a build that started
# before libhwloc-dev was installed linked a plugin without -lhwloc, which
# sbatch then refused ("undefined symbol: hwloc_bitmap_next").
check: deps-if-missing
	@$(MAKE) --no-print-directory WERROR=-Werror check-installed
check-installed: all unit $(CHECK_PREREQS)
	$(PYTHON) tests/run $(CHECK_ARGS)

install: all $(INSTALL_TARGETS)
uninstall:
	rm -f $(addprefix $(DESTDIR),$(UNINSTALL_FILES))

# Where `make install` puts things, as shell assignments (the local cluster
# and its tests read them instead of assuming a layout).
print-dirs:
	@printf '%s=%s\n' prefix '$(prefix)' bindir '$(bindir)' sbindir '$(sbindir)' libdir '$(libdir)' \
	  libexecdir '$(libexecdir)' datadir '$(datadir)' mandir '$(mandir)' SLURM_PLUGINDIR '$(SLURM_PLUGINDIR)' \
	  SLURM_LIBDIR '$(SLURM_LIBDIR)'

deps:
	./tests/cluster/deps.sh
deps-if-missing:
	@./tests/cluster/deps.sh --if-missing

# The demo's program is a test program: built here too, so that `make demo`
# works on a fresh clone before any `make check`.
demo: deps-if-missing
	@$(MAKE) --no-print-directory demo-installed
demo-installed: all $(B)/tests/mpi/imbalance.openmpi
	B=$(B) ./tests/cluster/demo.sh

cluster-start: deps-if-missing
	@$(MAKE) --no-print-directory cluster-start-installed
cluster-start-installed: all
	./tests/cluster/lab start
cluster-stop:
	./tests/cluster/lab stop

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

# What `make format` would change, as an error; every installed Python file
# against Python 3.6 (vermin, in a venv of its own: tests/py36-lint); and
# every Python file of the tree (the entry scripts have no .py) compiled
# without running it or writing a .pyc.
lint:
	clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h')
	$(PYTHON) tests/py36-lint
	$(PYTHON) -c 'import sys; [compile(open(f, "rb").read(), f, "exec") for f in sys.argv[1:]]' \
	  $$(git ls-files '*.py') $$(git grep -l '^#!.*python' -- ':!*.py')

clean:
	rm -rf $(B)
