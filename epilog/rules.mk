# SPDX-License-Identifier: BSD-3-Clause
# ---- epilog/: accounting and reporting (node Epilog, EpilogSlurmctld, the
# `mpi-pstate` command) -- a Python stdlib package -- and the libslurm tool
# that writes the summary into slurmdbd.
#
# Installed layout:
#   $(bindir)/mpi-pstate                          the command: the package's one entry script,
#   $(bindir)/mpi-pstate-exec                     also installed as `mpi-pstate exec`
#   $(sbindir)/mpi-pstate-epilog                  node Epilog entry point
#   $(sbindir)/mpi-pstate-epilog-slurmctld        EpilogSlurmctld entry point
#   $(libexecdir)/mpi-pstate/mpi-pstate-dbcomment libslurm: SystemComment writer
#   $(datadir)/mpi-pstate/python/mpi_pstate/      the package (__init__.py, agent_args.py) and
#       core/ model/ site/ user/                  its subpackages by role (mpi_pstate/__init__.py)
#   $(mandir)/man1/mpi-pstate.1, man8/mpi-pstate-epilog.8
#   $(systemdunitdir)/mpi-pstate-{flush,prune}.{service,timer}  installed, not enabled
#   $(datadir)/mpi-pstate/mpi-pstate.cron         cron example (sites without systemd)

EPILOG_DBCOMMENT := $(B)/epilog/mpi-pstate-dbcomment
EPILOG_PY := $(sort $(wildcard epilog/mpi_pstate/*.py))
# Each subpackage, a directory of its own: what Slurm runs (site/) apart from
# what users run (user/), beside the shared pieces (core/, model/).
EPILOG_SUBPKGS := $(patsubst epilog/mpi_pstate/%/__init__.py,%,$(sort $(wildcard epilog/mpi_pstate/*/__init__.py)))
EPILOG_SUBPKG_PY := $(sort $(foreach d,$(EPILOG_SUBPKGS),$(wildcard epilog/mpi_pstate/$(d)/*.py)))
EPILOG_PYDIR = $(datadir)/mpi-pstate/python
# systemd reads units from /usr/lib/systemd/system and /usr/local/lib/systemd/system
# (a package installs everything under /usr: tests/py/test_packaging.py).
systemdunitdir ?= $(prefix)/lib/systemd/system
EPILOG_UNITS := $(patsubst packaging/systemd/%.in,$(B)/epilog/units/%,$(wildcard packaging/systemd/*.in))
EPILOG_CRON := $(B)/epilog/mpi-pstate.cron
EPILOG_SUBST = sed -e 's|@PYDIR@|$(EPILOG_PYDIR)|' -e 's|@BINDIR@|$(bindir)|' \
	-e 's|@SBINDIR@|$(sbindir)|' -e 's|@LIBEXECDIR@|$(libexecdir)|' -e 's|@LIBDIR@|$(libdir)|'

$(B)/epilog:
	mkdir -p $@

# Slurm headers are not ours to warn about; libslurm is the only extra library.
$(EPILOG_DBCOMMENT): epilog/mpi-pstate-dbcomment.c $(COMMON_LIB) | $(B)/epilog
	$(CC) $(CSTD) $(OPT) $(WARN) $(HARDEN) $(DEPFLAGS) -fPIE -Icommon $(SLURM_CFLAGS) $(USER_CFLAGS) \
	  -o $@ $< $(COMMON_LIB) $(LDFLAGS_COMMON) -pie $(SLURM_LIBS)

$(B)/epilog/units/%: packaging/systemd/%.in | $(B)/epilog
	mkdir -p $(dir $@) && $(EPILOG_SUBST) $< > $@.tmp && mv -f $@.tmp $@

$(EPILOG_CRON): packaging/cron/mpi-pstate.cron.in | $(B)/epilog
	$(EPILOG_SUBST) $< > $@.tmp && mv -f $@.tmp $@

.PHONY: epilog install-epilog
epilog: $(EPILOG_DBCOMMENT) $(EPILOG_UNITS) $(EPILOG_CRON)

install-epilog: $(EPILOG_DBCOMMENT) $(EPILOG_UNITS) $(EPILOG_CRON)
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(sbindir) $(DESTDIR)$(libexecdir)/mpi-pstate \
	  $(DESTDIR)$(EPILOG_PYDIR)/mpi_pstate $(addprefix $(DESTDIR)$(EPILOG_PYDIR)/mpi_pstate/,$(EPILOG_SUBPKGS)) \
	  $(DESTDIR)$(mandir)/man1 $(DESTDIR)$(mandir)/man8
	install -m 0755 $(EPILOG_DBCOMMENT) $(DESTDIR)$(libexecdir)/mpi-pstate/
	# installed by earlier releases: the evaluation tool is the project's now (bench/eval/)
	rm -f $(DESTDIR)$(libexecdir)/mpi-pstate/mpi-pstate-bench
	# the modules of the flat layout of earlier releases (mpi_pstate/*.py but
	# this release's own): nothing imports them any more
	for f in $(DESTDIR)$(EPILOG_PYDIR)/mpi_pstate/*.py; do \
	  case " $(notdir $(EPILOG_PY)) " in *" $${f##*/} "*) ;; *) rm -f "$$f";; esac; \
	done
	install -m 0644 $(EPILOG_PY) $(DESTDIR)$(EPILOG_PYDIR)/mpi_pstate/
	$(foreach d,$(EPILOG_SUBPKGS),install -m 0644 $(sort $(wildcard epilog/mpi_pstate/$(d)/*.py)) \
	  $(DESTDIR)$(EPILOG_PYDIR)/mpi_pstate/$(d)/ &&) true
	for e in $(bindir)/mpi-pstate $(bindir)/mpi-pstate-exec; do \
	  $(EPILOG_SUBST) epilog/mpi-pstate > $(DESTDIR)$$e.tmp && chmod 0755 $(DESTDIR)$$e.tmp && \
	  mv -f $(DESTDIR)$$e.tmp $(DESTDIR)$$e || exit 1; \
	done
	$(EPILOG_SUBST) epilog/mpi-pstate-epilog.in > $(DESTDIR)$(sbindir)/mpi-pstate-epilog.tmp
	chmod 0755 $(DESTDIR)$(sbindir)/mpi-pstate-epilog.tmp && mv -f $(DESTDIR)$(sbindir)/mpi-pstate-epilog.tmp $(DESTDIR)$(sbindir)/mpi-pstate-epilog
	for e in epilog-slurmctld; do \
	  printf '#!/bin/sh\n# Slurm %s entry point of mpi-pstate (see mpi-pstate-epilog(8)); always exits 0.\nexec %s %s "$$@"\n' \
	    "$$e" "$(bindir)/mpi-pstate" "$$e" > $(DESTDIR)$(sbindir)/mpi-pstate-$$e.tmp && \
	  chmod 0755 $(DESTDIR)$(sbindir)/mpi-pstate-$$e.tmp && \
	  mv -f $(DESTDIR)$(sbindir)/mpi-pstate-$$e.tmp $(DESTDIR)$(sbindir)/mpi-pstate-$$e || exit 1; \
	done
	install -m 0644 man/mpi-pstate.1 $(DESTDIR)$(mandir)/man1/
	install -m 0644 man/mpi-pstate-epilog.8 $(DESTDIR)$(mandir)/man8/
	install -d $(DESTDIR)$(systemdunitdir) $(DESTDIR)$(datadir)/mpi-pstate
	install -m 0644 $(EPILOG_UNITS) $(DESTDIR)$(systemdunitdir)/
	install -m 0644 $(EPILOG_CRON) $(DESTDIR)$(datadir)/mpi-pstate/

ALL_TARGETS += $(EPILOG_DBCOMMENT) $(EPILOG_UNITS) $(EPILOG_CRON)
INSTALL_TARGETS += install-epilog
UNINSTALL_FILES += $(bindir)/mpi-pstate $(bindir)/mpi-pstate-exec \
	$(sbindir)/mpi-pstate-epilog \
	$(sbindir)/mpi-pstate-epilog-slurmctld $(libexecdir)/mpi-pstate/mpi-pstate-dbcomment \
	$(addprefix $(EPILOG_PYDIR)/mpi_pstate/,$(notdir $(EPILOG_PY))) \
	$(patsubst epilog/mpi_pstate/%,$(EPILOG_PYDIR)/mpi_pstate/%,$(EPILOG_SUBPKG_PY)) \
	$(mandir)/man1/mpi-pstate.1 $(mandir)/man8/mpi-pstate-epilog.8 \
	$(addprefix $(systemdunitdir)/,$(notdir $(EPILOG_UNITS))) $(datadir)/mpi-pstate/mpi-pstate.cron
