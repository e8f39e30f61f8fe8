# Arbiter — two commands: `make run` (set up and serve the demo) and `make test` (set up and run the suite).
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=
# `make run` serves with gunicorn: one process, four threads, no request timeout (in-process tasks
# may run long); on SQLite this answered ten raters' flow with a p95 of 49-69 ms against 64-106 ms
# for Django's threaded runserver (docs/benchmarks.md, "fifth pass"). `manage.py runserver` still works.
RUN_SERVER_ARGS ?= --workers 1 --threads 4 --timeout 0 --access-logfile -
# Participant links printed by the demo commands name the origin `make run` serves on
# (unless ARBITER_PUBLIC_URL says otherwise).
export ARBITER_SERVE_ORIGIN := http://$(HOST):$(PORT)

# A Python >= 3.12: PATH first, then pyenv's installed versions.
BASE_PYTHON := $(shell for c in python3.13 python3.12 python3 python; do \
	  p=$$(command -v $$c 2>/dev/null) || continue; \
	  $$p -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null && { echo $$p; exit 0; }; \
	done; \
	for p in $$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV); do \
	  $$p -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null && { echo $$p; exit 0; }; \
	done)

.PHONY: help setup run test lint demo demo-login migrate chromium clean cluster cluster-stop

help:
	@echo "make run    set up (venv, packages, database, demo study) and serve http://$(HOST):$(PORT)"
	@echo "make test   set up and run the whole test suite"
	@echo "make lint   ruff + mypy"
	@echo "make cluster       HAProxy, two web nodes, PgBouncer, two Celery workers on loopback (deploy/cluster/)"
	@echo "make cluster-stop  stop it"

$(STAMP): pyproject.toml
	@if [ -z "$(BASE_PYTHON)" ]; then echo "error: Arbiter needs Python >= 3.12 (Django 6); none found on PATH or in pyenv's versions" >&2; exit 1; fi
	@test -x $(PY) || $(BASE_PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

node_modules/.installed: package.json package-lock.json
	@command -v npm >/dev/null || { echo "error: npm is needed to install htmx (apt-get install npm)" >&2; exit 1; }
	npm ci --no-audit --no-fund --silent
	@touch node_modules/.installed

setup: $(STAMP) node_modules/.installed
	@mkdir -p var/static

migrate: setup
	$(PY) manage.py migrate --noinput -v0

# The demo login is kept in var/demo-login.txt (readable by you only; var/ is never committed) so
# that `make demo` and `make run` print it every time, not only when the demo is first made.
DEMO_LOGIN := var/demo-login.txt
demo: migrate
	@set -o pipefail; $(PY) manage.py shell --no-imports -c "from annotation.models import Study; import sys; sys.exit(0 if Study.objects.filter(slug='demo').exists() else 1)" \
	  && echo "Demo study already present (delete var/ to start over)." \
	  || { $(PY) manage.py make_demo_study --slug demo --seed 1 --with-users | tee var/demo-setup.log \
	       && (umask 077; grep '^login:' var/demo-setup.log > $(DEMO_LOGIN) || true) && rm -f var/demo-setup.log \
	       && $(PY) manage.py calibrate demo --json var/demo-calibration.json --bootstrap 500 --freeze demo-v1 >/dev/null \
	       && echo "Froze coefficient set demo-v1: start a leaderboard from the study page."; }
	@for kind in pairwise checklist rating; do \
	  $(PY) manage.py shell --no-imports -c "from annotation.models import Study; import sys; sys.exit(0 if Study.objects.filter(slug='demo-$$kind').exists() else 1)" \
	    || $(PY) manage.py make_demo_study --kind $$kind --seed 1 || exit 1; \
	done
	@$(MAKE) --no-print-directory demo-login

# The demo researcher's login: the saved line, else how to get a new one.
demo-login:
	@if [ -s $(DEMO_LOGIN) ]; then cat $(DEMO_LOGIN); \
	else echo "login: researcher (password not saved in $(DEMO_LOGIN); set one: $(PY) manage.py changepassword researcher)"; fi

run: demo
	@echo "participant link (demo): $$($(PY) manage.py study_link demo)"
	@echo "Arbiter on http://$(HOST):$(PORT)/  (tasks run in-process; set CELERY_BROKER_URL for real workers)"
	@$(MAKE) --no-print-directory demo-login
	DJANGO_SETTINGS_MODULE=config.settings.local $(VENV)/bin/gunicorn config.wsgi:application $(RUN_SERVER_ARGS) -b $(HOST):$(PORT)

# Debian's Chromium for the browser tests (Playwright drives it; no browser download).
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "warning: could not install chromium"; \
	  else echo "warning: /usr/bin/chromium missing; install Debian's chromium package for the browser tests"; fi; \
	fi

test: setup chromium
	$(PY) -m pytest $(PYTEST_ARGS)

# The loopback cluster (docs/deploy.md): installs Debian's pgbouncer and haproxy when missing, uses
# the machine's PostgreSQL (database arbiter_cluster) and Redis (db 7); everything under var/cluster/.
cluster: setup
	$(PY) deploy/cluster/cluster.py up

cluster-stop:
	$(PY) deploy/cluster/cluster.py down

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy stats annotation calibration judges kind_reports ranking demo config deploy

clean:
	rm -rf $(VENV) node_modules var
