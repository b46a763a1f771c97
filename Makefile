# waldur.site_agent: developer entry points. Every target creates the venv it needs.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_WORKERS ?= 2
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.cache/collections
export ANSIBLE_NOCOLOR := 1

.PHONY: help venv demo test lint sanity unit integration molecule bench clean collection-link system-packages

help:
	@echo "make demo   - run the order, report and membership passes against the bundled simulators"
	@echo "make test   - lint, sanity, unit and integration tests"
	@echo "make bench  - benchmarks (not part of make test)"

$(STAMP): requirements.txt requirements-dev.txt
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

test: venv lint sanity unit integration

lint: venv
	$(BIN)/ansible-lint --offline -q
	$(BIN)/antsibull-changelog lint

sanity: venv
	VENV=$(VENV) scripts/sanity.sh

unit: venv
	$(PY) -m pytest tests/unit tests/contract -q -n $(PYTEST_WORKERS)

# Debian packages some tests need (systemd-analyze, a Java runtime for ansible-rulebook,
# RabbitMQ for the event tests); a no-op when present.
system-packages:
	scripts/ensure-system-packages.sh
	scripts/ensure-java.sh
	scripts/rabbitmq.sh install

# Integration tests race real processes (ansible-playbook, brokers, killed passes) on a
# 2-core machine; a failure is retried once and reported as a rerun in the summary.
integration: venv system-packages
	$(PY) -m pytest tests/integration -q -n $(PYTEST_WORKERS) --reruns 1 --reruns-delay 2

# The roles' Molecule scenarios (make integration runs them too, through pytest).
molecule: venv
	for scenario in order_process report membership_sync; do $(BIN)/molecule test -s $$scenario || exit 1; done

bench: venv
	$(PY) -m bench

clean:
	rm -rf .cache .pytest_cache tests/output context
