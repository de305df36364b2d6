# toolnexus console. `make run` and `make test` are all a fresh machine needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

URL := http://$(HOST):$(PORT)/

.PHONY: run run-cluster lint docs test venv test-venv migrate static demo-user bench screenshot clean

# The console and what it needs to run: `make run` installs nothing more.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $@

# The test extras (pytest, playwright, hypothesis, ...), on top of the runtime: `make test`, `make bench`.
$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

test-venv: $(VENV)/.installed-test

migrate: venv
	mkdir -p var
	$(PY) manage.py migrate --noinput

# Static files under hashed names, compressed, into var/static (docs/operations.md): quick when nothing changed.
static: venv
	$(PY) manage.py collectstatic --noinput --verbosity 0

# Prints the URL and the login to use: the last lines before daphne's own.
demo-user: migrate
	@$(PY) manage.py ensure_demo_user --url $(URL)

run: static demo-user
	@$(VENV)/bin/daphne -b $(HOST) -p $(PORT) toolnexus_site.asgi:application

# Two consoles (PORT and PORT+1) on a local PostgreSQL and Redis; data in var/cluster/ (docs/scaling.md).
run-cluster: venv
	$(PY) scripts/run_cluster.py --port $(PORT)

# mypy checks what [tool.mypy] in pyproject.toml lists (the services, reads and models); cache in var/.
lint: test-venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# The docs site (mkdocs.yml) into var/site, warnings as errors; its API reference is generated from the
# OpenAPI document (docs/hooks/api_reference.py). Open var/site/index.html.
docs: test-venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

test: test-venv lint docs
	mkdir -p var test-artifacts
	$(PY) -m pytest $(PYTEST_ARGS)

bench: test-venv
	mkdir -p bench/results
	-$(PY) bench/longpoll.py   # exits 1 when its p99 misses the target; the other benchmarks still run
	-$(PY) bench/realtime.py   # exits 1 when a target is missed; writes bench/results/realtime.{json,png}
	$(PY) bench/roundtrip.py --four-step-floor   # the approve round trip from outside, beside bench/thin_app (both floors); bench/results/roundtrip.json
	-$(PY) bench/health.py     # /healthz and /readyz p50/p99 beside a JSON 404; exits 1 over 5 ms p99; bench/results/health.json
	-$(PY) bench/inbox_query.py   # each search and filter at 10,000 open, SQLite and PostgreSQL; exits 1 over 300 ms
	$(PY) bench/audit_page.py
	$(PY) bench/inbox.py       # the inbox at 1,000 and 10,000 open requests: first view, queries, idle CPU
	$(PY) bench/soak.py        # 5 minutes, two consoles, one killed every 30 s; exits 1 when a check is not 0

screenshot: test-venv
	UPDATE_README_SCREENSHOT=1 $(PY) -m pytest -q tests/e2e -k screenshot

clean:
	rm -rf var test-artifacts
