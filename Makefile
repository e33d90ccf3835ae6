# sluice — set-up, tests and the demo. Every target is idempotent and installs what is
# missing: Debian packages, the .venv, and a running Open vSwitch (userspace datapath).

SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
APT_PACKAGES := mininet openvswitch-switch iperf3 ethtool iputils-ping iproute2 python3-venv chromium systemd iptables
# iptables: the pias baseline tags packets at the hosts (mangle OUTPUT, connbytes + DSCP;
# mininet_fabric/pias.py)
# chromium: the headless browser of the live-page test (tests/fabric/controller/test_live_browser.py)
# systemd: systemd-analyze checks deploy/systemd/'s units, and the kill test runs them under
# a real systemd in namespaces of its own (tests/unit/project/test_systemd_units.py)
# The venv is made from Debian's python3 so that it sees Debian's `mininet` module.
SYSTEM_PYTHON := /usr/bin/python3
PYTEST_ARGS ?=
# torch for the test venvs: the CPU wheel this image carries (an unpinned torch would
# pull the multi-GB CUDA build). The package itself needs only torch>=2.1.
TORCH_PIN ?= torch==2.13.0
# MXNet 1.9.1's metadata caps numpy<2, a cap that predates numpy 2 (ps_runtime.numpy_compat
# makes it run there): it is installed without its declared dependencies.
MXNET_PIN := mxnet==1.9.1
VENV_NP2 := .venv-numpy2

.PHONY: all setup system slurm venv venvs ovs test test-fast test-numpy2 demo demo-slurm bench clean-fabric help

all: test

help:
	@echo "make demo   - set up and run the demo: one Philly-drawn workload in four arms (Slurm today .. sluice), two-rack-100g fabric"
	@echo "make demo-slurm - the demo's jobs through the scheduler service and a local Slurm cluster on the fabric"
	@echo "make test   - set up and run the whole test suite (needs root for the fabric tests)"
	@echo "make bench  - run the benchmarks under bench/"

setup: system slurm venv ovs

# Debian packages: installed only when one is missing.
system:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null \
	    || { echo "apt-get install failed for:$$missing" >&2; exit 1; }; \
	fi

# Debian's Slurm 22.05 and munge, for the local Slurm cluster the tests and `make demo-slurm`
# bring up on the Mininet fabric (mininet_fabric/slurm_cluster.py starts its own munged,
# slurmctld and slurmds). The packages' own services must not run: their postinst would
# start munge/slurmctld/slurmd (a policy-rc.d that answers 101 forbids it for the install)
# and any that run anyway are stopped through their init scripts.
# slurmdbd + MariaDB: the cluster's accounting (sacct), each cluster with its own database
# server under its work directory (mininet_fabric/slurm_accounting.py).
SLURM_PACKAGES := slurmctld slurmd slurm-client munge slurmdbd mariadb-server
# Unix users the cluster's jobs run as (sluice's token -> user map in the tests and the demo)
SLURM_TEST_USERS := sluice-alice sluice-bob

slurm:
	@missing=""; for p in $(SLURM_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  made_policy=""; \
	  if [ ! -e /usr/sbin/policy-rc.d ]; then \
	    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && made_policy=1; \
	  fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  rc=$$?; [ -n "$$made_policy" ] && rm -f /usr/sbin/policy-rc.d; \
	  [ $$rc -eq 0 ] || { echo "apt-get install failed for:$$missing" >&2; exit 1; }; \
	fi; \
	for s in slurmctld:/run/slurmctld.pid slurmd:/run/slurmd.pid munge:/run/munge/munged.pid \
	    slurmdbd:/run/slurmdbd.pid mariadb:/run/mysqld/mysqld.pid; do \
	  pidfile=$${s#*:}; s=$${s%%:*}; \
	  if [ -s $$pidfile ] && kill -0 "$$(cat $$pidfile)" 2>/dev/null; then \
	    echo "stopping the $$s service started by its Debian package"; /etc/init.d/$$s stop >/dev/null 2>&1 || true; \
	  fi; \
	done; \
	for u in $(SLURM_TEST_USERS); do \
	  id -u $$u >/dev/null 2>&1 || useradd --user-group --create-home --shell /bin/sh $$u \
	    || { echo "useradd $$u failed" >&2; exit 1; }; \
	done

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(SYSTEM_PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --upgrade pip >/dev/null
	$(PY) -m pip install -q -e '.[test]' 'numpy<2' '$(TORCH_PIN)'
	$(PY) -m pip install -q --no-deps '$(MXNET_PIN)'
	@touch $@

# Open vSwitch: start ovsdb-server and ovs-vswitchd when they are not running.
ovs:
	@if ! ovs-vsctl --timeout=3 show >/dev/null 2>&1; then \
	  echo "starting Open vSwitch (userspace datapath)"; \
	  /usr/share/openvswitch/scripts/ovs-ctl start >/dev/null 2>&1 || true; \
	  ovs-vsctl --timeout=10 show >/dev/null || { echo "Open vSwitch did not start" >&2; exit 1; }; \
	fi

# Two pytest runs: the unit tree (tests/unit/) on TEST_WORKERS processes (pytest-xdist;
# its tests share no machine-wide state), then the fabric tree (tests/fabric/) alone and
# serially: its tests share one Open vSwitch and the interface names, and measure the
# network's timing, so nothing else runs beside them. Both run even if the first fails;
# then one list of the 25 slowest tests over both, from the runs' JUnit XML reports.
# `fast_only` tests (the small budget of a slow test) are left out: the slow one runs.
TEST_WORKERS ?= auto
TEST_REPORTS := $(VENV)/test-reports
test: system slurm ovs venvs
	$(VENV)/bin/lint-imports
	@mkdir -p $(TEST_REPORTS); rm -f $(TEST_REPORTS)/unit.xml $(TEST_REPORTS)/fabric.xml; rc=0; \
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal -m "not fast_only" \
	  --junitxml=$(TEST_REPORTS)/unit.xml tests/unit $(PYTEST_ARGS) || rc=1; \
	$(PY) -m pytest -q -m "not fast_only" --junitxml=$(TEST_REPORTS)/fabric.xml \
	  tests/fabric $(PYTEST_ARGS) || rc=1; \
	$(PY) tests/support/slowest_tests.py 25 $(TEST_REPORTS)/unit.xml $(TEST_REPORTS)/fabric.xml; \
	exit $$rc

# The unit tree only (tests/unit/: no root, no fabric; tests/fabric/ needs both), without
# the slow tests (with the small budgets of some of them, `fast_only`): quick feedback
# while developing. `make test-fast PYTEST_ARGS="-n auto"` runs it on every core.
test-fast: venv
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -m "not slow" tests/unit $(PYTEST_ARGS)

# Both venvs, with the numpy-2 checks (test-numpy2) run beside the main venv's pip install:
# that install is one process, much of it unpacking wheels to the disk, and the checks need
# only their own venv. That venv is built first, alone: two editable installs at once
# would both write sluice.egg-info in the checkout. The checks' output is shown when both
# are done; a failure of either stops here.
venvs:
	@$(MAKE) --no-print-directory $(VENV_NP2)/.installed
	@$(MAKE) --no-print-directory test-numpy2 >$(VENV_NP2)/check.log 2>&1 & checks=$$!; \
	$(MAKE) --no-print-directory venv; venv_rc=$$?; \
	wait $$checks; checks_rc=$$?; cat $(VENV_NP2)/check.log; \
	[ $$checks_rc -eq 0 ] || echo "make test-numpy2 failed (its output above)" >&2; \
	[ $$venv_rc -eq 0 ] && [ $$checks_rc -eq 0 ]

# The PS runtime on numpy >= 2 (same Python): its own venv, the compatibility tests, the
# PS-runtime tests and one real `sluice train` job.
test-numpy2: $(VENV_NP2)/.installed
	$(VENV_NP2)/bin/python -c "import numpy; assert int(numpy.__version__.split('.')[0]) >= 2, numpy.__version__; print('numpy', numpy.__version__)"
	$(VENV_NP2)/bin/python -m pytest -q -m "not slow" $(addprefix tests/unit/ps_runtime/,\
	  test_numpy_compat.py test_launcher.py test_datapath.py) $(PYTEST_ARGS)
	$(VENV_NP2)/bin/sluice train examples/jobs/mixed.yaml --job resnet18-a --workers 2 --batches 3 \
	  --device cpu --input-size 32 --out $(VENV_NP2)/train-check --quiet

$(VENV_NP2)/.installed: pyproject.toml
	@test -x $(VENV_NP2)/bin/python || $(SYSTEM_PYTHON) -m venv $(VENV_NP2)
	$(VENV_NP2)/bin/python -m pip install -q --upgrade pip >/dev/null
	$(VENV_NP2)/bin/python -m pip install -q -e '.[test]' 'numpy>=2' '$(TORCH_PIN)'
	$(VENV_NP2)/bin/python -m pip install -q --no-deps '$(MXNET_PIN)'
	@touch $@

# The four arms (a Slurm today, b + sluice's priority, c sluice's scheduler, d both) on one
# workload drawn from the Philly trace's distributions; DEMO_ARGS e.g. "--out DIR --arms a,d".
DEMO_ARGS ?=
demo: setup
	$(VENV)/bin/sluice demo $(DEMO_ARGS)

# Six hand-chosen jobs (end_to_end/data/demo_jobs.yaml) through `sluice scheduler --executor slurm` and a local Slurm cluster on
# the fabric; DIR/slurm.json says which Slurm job ran where.
DEMO_SLURM_OUT ?= runs/demo-slurm
demo-slurm: setup
	$(VENV)/bin/sluice demo --executor slurm --out $(DEMO_SLURM_OUT)

bench: setup
	$(PY) -m bench.run_all

clean-fabric: venv
	$(VENV)/bin/sluice fabric clean
