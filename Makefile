# waldur.site_agent: developer entry points. Every target creates the venv it needs.
SHELL := /bin/bash
# make test runs on the newest supported ansible-core, 2.21 (Python 3.13, else 3.12; PATH or
# pyenv); make test-matrix runs the unit tests, the pass smoke and sanity on every supported
# release, 2.18 on Python 3.11 included.
PYTHON ?= $(shell scripts/find-python.sh 3.13 3.12)
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_WORKERS ?= 2
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.cache/collections
export ANSIBLE_NOCOLOR := 1

.PHONY: help venv demo check test test-matrix lint sanity galaxy docs unit integration molecule faults bench clean events-demo collection-link system-packages

help:
	@echo "make demo        - run the order, report and membership passes against the bundled simulators"
	@echo "make check       - lint and unit tests (quick, for everyday work)"
	@echo "make test        - lint, sanity, galaxy import, docsite, unit and integration tests, with each tier's time"
	@echo "make docs        - the collection's docsite (antsibull-docs, Sphinx) in .cache/docsite; fails on a warning"
	@echo "make test-matrix - unit tests and a smoke of every pass under each supported ansible-core"
	@echo "make events-demo - a local RabbitMQ and simulators to try event processing (docs/events.md)"
	@echo "make faults      - the whole fault matrix: every read of every pass answered wrong (make test runs a sample)"
	@echo "make molecule    - the roles' Molecule scenarios (make integration runs them too)"
	@echo "make bench       - benchmarks (not part of make test)"

$(STAMP): requirements.txt requirements-dev.txt
	@test -n "$(PYTHON)" || { echo "no Python 3.13 or 3.12 found: set PYTHON=/path/to/python3.13"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v "is ignored" || true
	set -o pipefail; $(PY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt 2>&1 | { grep -v "is ignored" || true; }
	touch $@

venv: $(STAMP) collection-link

# ansible resolves waldur.site_agent.* through this link to the working tree.
collection-link:
	@mkdir -p .cache/collections/ansible_collections/waldur
	@ln -sfn $(CURDIR) .cache/collections/ansible_collections/waldur/site_agent

demo: venv
	$(PY) -m scripts.demo

check: venv
	@scripts/run-tiers.sh lint unit

test: venv
	@scripts/run-tiers.sh lint sanity galaxy docs unit integration

# Every supported ansible-core in its own venv (.cache/matrix); see scripts/test-matrix.sh.
test-matrix:
	scripts/test-matrix.sh

lint: venv
	$(BIN)/ansible-lint --offline -q
	$(BIN)/antsibull-changelog lint

sanity: venv
	VENV=$(VENV) scripts/sanity.sh

# The docsite antsibull-docs builds for docs.ansible.com, from the collection's own documentation.
docs: venv
	VENV=$(VENV) scripts/build-docsite.sh

# galaxy-importer on the built tarball: what Galaxy and Automation Hub check on publishing.
galaxy: venv
	VENV=$(VENV) scripts/galaxy-import.sh

unit: venv
	$(PY) -m pytest tests/unit tests/contract -q -n $(PYTEST_WORKERS)

# Debian packages some tests need (systemd-analyze, a Java runtime for ansible-rulebook,
# RabbitMQ for the event tests); a no-op when present.
system-packages:
	scripts/ensure-system-packages.sh
	scripts/ensure-java.sh
	scripts/rabbitmq.sh install

# No reruns: a test that races real processes waits on a condition, and a flaky test is a
# defect to fix.
integration: venv system-packages
	$(PY) -m pytest tests/integration -q -n $(PYTEST_WORKERS)

# The roles' Molecule scenarios (make integration runs them too, through pytest).
molecule: venv
	for scenario in order_process report membership_sync; do PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/molecule test -s $$scenario || exit 1; done

# Every case of the fault matrix (tests/faults; make test runs a sample of them), then
# docs/faults.md rendered from the results.
faults: venv
	rm -f .cache/fault-matrix-results.json
	FAULT_MATRIX=all $(PY) -m pytest tests/integration/test_fault_matrix.py -q -n $(PYTEST_WORKERS) -k faulted; \
	status=$$?; $(PY) -m tests.faults render; exit $$status

# A local RabbitMQ (web-STOMP), the Waldur simulator publishing events to it and the DigitalOcean
# simulator, for docs/events.md's "Try it locally"; .venv/bin/python -m scripts.events_demo stop.
events-demo: venv
	scripts/ensure-java.sh
	$(PY) -m scripts.events_demo start

bench: venv
	$(PY) -m bench

clean:
	rm -rf .cache .pytest_cache tests/output context
