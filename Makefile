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
# for Django's threaded runserver (docs/benchmarks-history.md, "`make run` on gunicorn"). `manage.py runserver` still works.
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

.PHONY: help setup setup-run run test lint demo demo-login migrate chromium clean cluster cluster-stop

help:
	@echo "make run    set up (venv, packages, database, demo study) and serve http://$(HOST):$(PORT)"
	@echo "make test   set up and run the whole test suite"
	@echo "make lint   ruff + mypy"
	@echo "make cluster       HAProxy, two web nodes, PgBouncer, two Celery workers on loopback (deploy/cluster/)"
	@echo "make cluster-stop  stop it"

# Each step of a first run says what it does (`==> ...`) and how long it took (on stderr). Two package sets:
# `make run` installs what the app needs (RUN_STAMP); `make test` and `make lint` add the dev tools
# (STAMP) on top, so nothing is installed twice. The packages are installed by uv (PyPI's `uv`, put
# into the venv by the venv's own pip, which is used as it is: no upgrade each time): it fetches the
# index pages in parallel, keeps every package unpacked in its cache (~/.cache/uv), so a second clone
# links them from disk, and compiles no byte code up front (Python writes a module's .pyc when it is
# first imported; compiling every installed module, mypy's and botocore's included, is ~50 s of CPU).
# A fresh clone's package step: 4 s with uv's cache warm, 14 s cold, where pip took 83 s
# (docs/decisions/0087-setup-with-uv.md). uv resolves from PyPI the versions pip resolves (pip freeze
# identical). Where uv cannot be installed, pip does the work.
# The app's set includes the render extra (Playwright for Python), so an upload of HTML outputs
# renders on `make run`; the browser is Debian's chromium (target `chromium`), never a download.
RUN_STAMP := $(VENV)/.installed-run
STEP = @printf '==> %s\n'
TIMED = bash -c 'start=$$SECONDS; "$$@" || exit; echo "    ($$((SECONDS - start)) s)" >&2' timed
INSTALL = bash -c 'if $(PY) -m pip install --quiet uv; then exec $(VENV)/bin/uv pip install --quiet --python $(PY) "$$@"; fi; \
	  echo "warning: could not install uv; installing with pip (slower)" >&2; exec $(PY) -m pip install --quiet "$$@"' install

$(VENV)/bin/python:
	@if [ -z "$(BASE_PYTHON)" ]; then echo "error: Arbiter needs Python >= 3.12 (Django 6); none found on PATH or in pyenv's versions" >&2; exit 1; fi
	$(STEP) "Python virtual environment in $(VENV) ($(BASE_PYTHON))"
	@$(BASE_PYTHON) -m venv $(VENV)

$(RUN_STAMP): pyproject.toml | $(VENV)/bin/python
	@if [ -f $(STAMP) ] && [ $(STAMP) -nt pyproject.toml ]; then touch $@; exit 0; fi; \
	  printf '==> %s\n' "Python packages the app needs, rendering included (uv; the longest step of a first run)"; \
	  $(TIMED) $(INSTALL) -e '.[render]' && touch $@

$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(STEP) "Python packages for tests and lint (pytest, Playwright, mypy, ...)"
	@$(TIMED) $(INSTALL) -e '.[dev]'
	@touch $@ $(RUN_STAMP)

node_modules/.installed: package.json package-lock.json
	@command -v npm >/dev/null || { echo "error: npm is needed to install htmx and ECharts (apt-get install npm)" >&2; exit 1; }
	$(STEP) "htmx and ECharts from the npm registry (npm ci)"
	@$(TIMED) npm ci --no-audit --no-fund --silent
	@touch node_modules/.installed

# setup: everything `make test` needs; setup-run: what `make run` needs.
setup: $(STAMP) node_modules/.installed
	@mkdir -p var/static

setup-run: $(RUN_STAMP) node_modules/.installed chromium
	@mkdir -p var/static

migrate: setup-run
	$(STEP) "database migrations (var/arbiter.sqlite3 unless DATABASE_URL says otherwise)"
	@$(TIMED) $(PY) manage.py migrate --noinput -v0

# The demo login is kept in var/demo-login.txt (readable by you only; var/ is never committed) so
# that `make demo` and `make run` print it every time, not only when the demo is first made.
# Each demo study is built once: one Django start finds the ones missing, and only those are made.
DEMO_LOGIN := var/demo-login.txt
DEMO_SLUGS := demo demo-pairwise demo-checklist demo-rating
demo: migrate
	@set -o pipefail; missing=$$($(PY) manage.py shell --no-imports -c "from annotation.models import Study; \
	  have = set(Study.objects.filter(slug__in='$(DEMO_SLUGS)'.split()).values_list('slug', flat=True)); \
	  print(' '.join(s for s in '$(DEMO_SLUGS)'.split() if s not in have))") || exit 1; \
	if [ -z "$$missing" ]; then echo "Demo studies already present (delete var/ to start over)."; fi; \
	for slug in $$missing; do \
	  if [ "$$slug" = demo ]; then \
	    printf '==> %s\n' "demo study 'demo' (drawn pages, simulated raters and judges)"; \
	    $(PY) manage.py make_demo_study --slug demo --seed 1 --with-users | tee var/demo-setup.log \
	      && (umask 077; grep '^login:' var/demo-setup.log > $(DEMO_LOGIN) || true) && rm -f var/demo-setup.log \
	      && printf '==> %s\n' "calibration of the demo's judges, frozen as demo-v1" \
	      && $(TIMED) $(PY) manage.py calibrate demo --json var/demo-calibration.json --bootstrap 500 --freeze demo-v1 >/dev/null \
	      && echo "Froze coefficient set demo-v1: start a leaderboard from the study page." || exit 1; \
	  else \
	    kind=$${slug#demo-}; printf '==> %s\n' "demo study '$$slug' ($$kind questionnaire)"; \
	    $(PY) manage.py make_demo_study --kind $$kind --seed 1 || exit 1; \
	  fi; \
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

# Debian's Chromium: the renderer of HTML uploads (`make run`) and of the browser tests (`make test`);
# Playwright drives it, no browser download. As root it is installed with apt-get; otherwise, or if
# that fails, one line says what to run, and everything but rendering HTML still works.
CHROMIUM_HINT := HTML uploads will not render until it is installed: sudo apt-get install chromium
chromium:
	@if [ ! -x /usr/bin/chromium ] && [ -z "$$ARBITER_CHROMIUM" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    printf '==> %s\n' "Debian's chromium (apt-get), the renderer of HTML outputs"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "warning: could not install Debian's chromium; $(CHROMIUM_HINT)" >&2; \
	  else echo "warning: /usr/bin/chromium is missing; $(CHROMIUM_HINT)" >&2; fi; \
	fi
	@# As root the renderer runs the browser as this unprivileged system user (docs/rendering.md "Isolation").
	@if [ "$$(id -u)" = 0 ] && ! getent passwd arbiter-render >/dev/null; then \
	  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin arbiter-render \
	  || echo "warning: could not create the user arbiter-render; the browser runs as nobody"; \
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
	$(VENV)/bin/mypy stats rule_score annotation objective calibration judges kind_reports ranking demo config deploy

clean:
	rm -rf $(VENV) node_modules var
