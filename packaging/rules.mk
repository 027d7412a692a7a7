# SPDX-License-Identifier: BSD-3-Clause
# ---- packaging/: the packages a site builds against its own Slurm.
#   make deb       $(B)/mpi-pstate_<VERSION>+slurm<X.Y>_<arch>.deb  (packaging/mkdeb.sh:
#                  Debian's dpkg tools on `make install prefix=/usr`; why, and how it
#                  follows Slurm upgrades, is written there)
#   make deb-lint  lintian on that package
#   make rpm       RPMs from packaging/mpi-pstate.spec in $(B)/rpm/RPMS (packaging/mkrpm.sh)
# tests/py/test_packaging.py checks both against `make install`.
.PHONY: deb deb-lint rpm

deb:
	VERSION='$(VERSION)' MAKE='$(MAKE)' packaging/mkdeb.sh '$(B)'

# The tags left are explained in packaging/lintian-expected; any other tag fails.
deb-lint: deb
	packaging/lint.sh '$(B)'

rpm:
	VERSION='$(VERSION)' packaging/mkrpm.sh '$(B)'

# rpmlint on the spec, the source RPM and every binary RPM of `make rpm`;
# any error fails (warnings are printed).  tests/py/test_packaging.py runs it.
.PHONY: rpm-lint
rpm-lint: rpm
	packaging/rpmlint.sh '$(B)'
