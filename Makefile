# sluice — set-up, tests and the demo. Every target is idempotent and installs what is
# missing: Debian packages, the .venv, and a running Open vSwitch (userspace datapath).

SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
APT_PACKAGES := mininet openvswitch-switch iperf3 ethtool iputils-ping iproute2 python3-venv chromium
# chromium: the headless browser of the live-page test (tests/test_live_browser.py)
# The venv is made from Debian's python3 so that it sees Debian's `mininet` module.
SYSTEM_PYTHON := /usr/bin/python3
PYTEST_ARGS ?=

.PHONY: all setup system venv ovs test test-fast demo bench clean-fabric help

all: test

help:
	@echo "make demo   - set up and run the default demo (two-rack fabric, six jobs, priority off vs on)"
	@echo "make test   - set up and run the whole test suite (needs root for the fabric tests)"
	@echo "make bench  - run the benchmarks under bench/"

setup: system venv ovs

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

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(SYSTEM_PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --upgrade pip >/dev/null
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

# Open vSwitch: start ovsdb-server and ovs-vswitchd when they are not running.
ovs:
	@if ! ovs-vsctl --timeout=3 show >/dev/null 2>&1; then \
	  echo "starting Open vSwitch (userspace datapath)"; \
	  /usr/share/openvswitch/scripts/ovs-ctl start >/dev/null 2>&1 || true; \
	  ovs-vsctl --timeout=10 show >/dev/null || { echo "Open vSwitch did not start" >&2; exit 1; }; \
	fi

test: setup
	$(PY) -m pytest -q $(PYTEST_ARGS)

# Unit tests only (no root, no fabric): quick feedback while developing.
test-fast: venv
	$(PY) -m pytest -q -m "not fabric and not slow" $(PYTEST_ARGS)

demo: setup
	$(VENV)/bin/sluice demo

bench: setup
	$(PY) bench/run_all.py

clean-fabric: venv
	$(VENV)/bin/sluice fabric clean
