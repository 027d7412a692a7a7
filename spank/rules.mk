# spank/: the SPANK plugin mpi_pstate.so, its man page and plugstack example,
# the generated option documentation, and the plugin's stub-driven unit test.
SPANK_SRCS := spank/mpi_pstate.c spank/wire.c
SPANK_OBJS := $(SPANK_SRCS:%.c=$(B)/%.o)
SPANK_SO := $(B)/spank/mpi_pstate.so
SPANK_MAN := $(B)/man/mpi_pstate.8
SPANK_CONF := $(B)/spank/plugstack.conf.example
SPANK_GEN := $(B)/gen/options.stamp
SPANK_TEST := $(B)/tests/unit/test_spank_plugin

# options.h includes options.def: every object built from a file that
# includes options.h must be rebuilt when the table changes, which the
# top-level header wildcard (common/*.h) does not cover.
$(B)/common/options.o $(B)/common/config.o: common/options.def

# Static pattern: only the plugin's own objects (spank/agent/ has its own rules).
$(SPANK_OBJS): $(B)/spank/%.o: spank/%.c $(wildcard spank/*.h) $(wildcard common/*.h) common/options.def
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -Ispank -c -o $@ $<

# Only the plugin identity and the slurm_spank_* hooks are exported
# (spank/mpi_pstate.lds); Slurm's own symbols resolve at load time.
$(SPANK_SO): $(SPANK_OBJS) $(COMMON_LIB) spank/mpi_pstate.lds
	@mkdir -p $(@D)
	$(CC) -shared $(LDFLAGS_COMMON) -Wl,--version-script=spank/mpi_pstate.lds -o $@ \
	  $(SPANK_OBJS) $(COMMON_LIB) $(COMMON_LIBS)

SPANK_SUBST = sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@SLURM_PLUGINDIR@|$(SLURM_PLUGINDIR)|g' \
	-e 's|@DATADIR@|$(datadir)|g'

$(SPANK_MAN): man/mpi_pstate.8.in
	@mkdir -p $(@D)
	$(SPANK_SUBST) $< >$@.tmp && mv $@.tmp $@

$(SPANK_CONF): spank/plugstack.conf.example.in
	@mkdir -p $(@D)
	$(SPANK_SUBST) $< >$@.tmp && mv $@.tmp $@

# The documentation fragments of the option table, for anyone who wants
# them from the build tree; the committed copies are checked by
# tests/py/test_options_gen.py.
$(SPANK_GEN): common/options.def spank/gen_options.py
	$(PYTHON) spank/gen_options.py --outdir $(B)/gen
	touch $@

ALL_TARGETS += $(SPANK_SO) $(SPANK_MAN) $(SPANK_CONF) $(SPANK_GEN)

# make check: the plugin exports exactly what Slurm looks up, nothing of the
# common archive (a visibility slip would either hide a hook from Slurm or
# leak our symbols into slurmstepd).
spank-check-exports: $(SPANK_SO)
	@got=$$(nm -D --defined-only $(SPANK_SO) | awk '{print $$3}' | sort | tr '\n' ' '); \
	want="plugin_name plugin_type plugin_version slurm_spank_exit slurm_spank_init slurm_spank_init_post_opt slurm_spank_job_epilog slurm_spank_job_prolog slurm_spank_task_init slurm_spank_task_init_privileged spank_plugin_version "; \
	if [ "$$got" != "$$want" ]; then echo "mpi_pstate.so exports: $$got"; echo "expected: $$want"; exit 1; fi
CHECK_PREREQS += spank-check-exports
.PHONY: spank-check-exports

# The plugin's hooks against a stub libslurm (spank/tests/spank_stub.c).
$(SPANK_TEST): spank/tests/test_plugin.c spank/tests/spank_stub.c spank/tests/spank_stub.h \
		$(SPANK_OBJS) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(OPT) -Wall -Wextra -Werror -Icommon -Ispank -Ispank/tests $(CHECK_CFLAGS) \
	  -o $@ spank/tests/test_plugin.c spank/tests/spank_stub.c $(SPANK_OBJS) $(COMMON_LIB) \
	  $(CHECK_LIBS) $(COMMON_LIBS)
UNIT_BINS += $(SPANK_TEST)

# Installing never activates the plugin: the snippet goes to datadir with
# its plugstack line commented out; the admin copies it (man 8 mpi_pstate).
install-spank: $(SPANK_SO) $(SPANK_MAN) $(SPANK_CONF)
	install -d $(DESTDIR)$(SLURM_PLUGINDIR) $(DESTDIR)$(mandir)/man8 \
	  $(DESTDIR)$(datadir)/mpi-pstate
	install -m 0755 $(SPANK_SO) $(DESTDIR)$(SLURM_PLUGINDIR)/mpi_pstate.so
	install -m 0644 $(SPANK_MAN) $(DESTDIR)$(mandir)/man8/mpi_pstate.8
	install -m 0644 $(SPANK_CONF) $(DESTDIR)$(datadir)/mpi-pstate/plugstack.conf.example
INSTALL_TARGETS += install-spank
UNINSTALL_FILES += $(SLURM_PLUGINDIR)/mpi_pstate.so $(mandir)/man8/mpi_pstate.8 \
	$(datadir)/mpi-pstate/plugstack.conf.example
.PHONY: install-spank
