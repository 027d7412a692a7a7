# SPDX-License-Identifier: BSD-3-Clause
# ---- watch/: what a site's Prometheus and Grafana take from mpi-pstate's
# metrics (docs/watching.md; the metrics themselves: epilog/mpi_pstate/metrics.py).
#
# Installed layout:
#   $(datadir)/mpi-pstate/prometheus-rules.yml    alerting rules (rule_files:)
#   $(datadir)/mpi-pstate/grafana-dashboard.json  dashboard to import into Grafana

WATCH_FILES := watch/prometheus-rules.yml watch/grafana-dashboard.json

.PHONY: install-watch
install-watch:
	install -d $(DESTDIR)$(datadir)/mpi-pstate
	install -m 0644 $(WATCH_FILES) $(DESTDIR)$(datadir)/mpi-pstate/

INSTALL_TARGETS += install-watch
UNINSTALL_FILES += $(addprefix $(datadir)/mpi-pstate/,$(notdir $(WATCH_FILES)))
