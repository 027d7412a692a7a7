# ---- bench/eval/: mpi-pstate-bench, the evaluation a site runs on its own
# nodes (docs/evaluation.md).  Installed beside the other helpers, where
# `mpi-pstate bench` finds it; it finds <prefix>/bin/mpi-pstate from there.
.PHONY: install-bench-eval
install-bench-eval:
	install -d $(DESTDIR)$(libexecdir)/mpi-pstate
	install -m 0755 bench/eval/mpi-pstate-bench $(DESTDIR)$(libexecdir)/mpi-pstate/mpi-pstate-bench

INSTALL_TARGETS += install-bench-eval
UNINSTALL_FILES += $(libexecdir)/mpi-pstate/mpi-pstate-bench
