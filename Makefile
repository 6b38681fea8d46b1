# Two entry points: `make run` (embedded, no Postgres/Redis) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# The suite runs against the local Postgres and Redis (a database and a Redis db of its own).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/hitl
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15
# In parallel (pytest-xdist): one worker per core, at most 3 (tests/xdist_env.py). Each worker
# has its own test database (test_hitl_gw0 ...) and Redis db (15, 14 ...); a test file stays
# on one worker, with its module's browser or OIDC provider. TEST_WORKERS=0: one process.
TEST_WORKERS ?= auto

.PHONY: run install install-dev test services chromium pgbouncer oidc-provider js-clients worker web bench lint

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Installed once per pyproject.toml: a stamp in the venv says so, and a restart of
# `make run` skips pip (an edit of pyproject.toml, or a new venv, installs again).
INSTALLED := $(VENV)/.hitl-installed
INSTALLED_DEV := $(VENV)/.hitl-installed-dev

install: $(INSTALLED)

install-dev: $(INSTALLED_DEV)

$(INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(INSTALLED_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(INSTALLED)

run: install
	$(BIN)/python manage.py migrate --noinput -v0
	HITL_HOST=$(HOST) HITL_PORT=$(PORT) $(BIN)/python manage.py demo_setup
	HITL_HOST=$(HOST) HITL_PORT=$(PORT) $(BIN)/python -m hitl.web -b $(HOST) -p $(PORT) hitl.asgi:application

services:
	scripts/ensure-services

chromium:
	scripts/ensure-chromium

pgbouncer:
	scripts/ensure-pgbouncer

oidc-provider:
	scripts/ensure-oidc-provider

js-clients:
	scripts/ensure-js-clients

test: install-dev services chromium pgbouncer oidc-provider js-clients
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

lint: install-dev
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/python manage.py makemigrations --check --dry-run
