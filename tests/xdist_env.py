"""Each pytest-xdist worker gets its own Redis db and var/ directory (`-p tests.xdist_env`).

pytest-django gives every worker its own test database (test_<name>_gw0, _gw1 ...). The
rest of what a test process and the servers it starts share is chosen here, before Django
reads its settings (pytest-django loads them while pytest starts, before any conftest):
the worker's environment is rewritten, so the test process and every daphne, Celery
worker and beat it spawns agree. Worker gwN takes the Redis db N below REDIS_URL's
(db 15 -> gw0 15, gw1 14) and var/pytest-gwN as HITL_VAR_DIR (its media, secret key
and schedule files). A run without xdist is left as it is.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Each worker starts its own daphne, Celery and Chromium processes, each with a Postgres
# pool: past this many the machine's cores and Postgres's max_connections (100 by
# default) run short: one worker peaked at 31 sessions, two together at 44.
MAX_WORKERS = 3


def worker_index() -> int:
    """This process's xdist worker number (gw1 -> 1); 0 outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") else 0


def redis_url_for_worker(url: str, index: int) -> str:
    """The Redis URL with its db number lowered by the worker's index."""
    parts = urlsplit(url)
    db = int(parts.path.strip("/") or 0) - index
    if db < 0:
        raise pytest.UsageError(
            f"pytest-xdist worker gw{index} would need Redis db {db} below {url}: "
            "run fewer workers (-n) or give REDIS_URL a higher db."
        )
    return urlunsplit(parts._replace(path=f"/{db}"))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    index = worker_index()
    for name in ("REDIS_URL", "CELERY_BROKER_URL"):
        if os.environ.get(name, "").startswith(("redis://", "rediss://")):
            os.environ.setdefault(f"PYTEST_SUITE_{name}", os.environ[name])  # the one given
            os.environ[name] = redis_url_for_worker(os.environ[name], index)
    var = Path(os.environ.get("HITL_VAR_DIR") or ROOT / "var") / f"pytest-{worker}"
    os.environ["HITL_VAR_DIR"] = str(var)
    if os.environ.get("MEDIA_ROOT"):
        os.environ["MEDIA_ROOT"] = str(Path(os.environ["MEDIA_ROOT"]) / f"pytest-{worker}")


@pytest.hookimpl(optionalhook=True)  # an xdist hook: pytest -p no:xdist must still run
def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto`: one worker per CPU this process may use, at most MAX_WORKERS, and no
    more than REDIS_URL's db number leaves Redis dbs for (gw0 takes it, gw1 the one below)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    url = os.environ.get("REDIS_URL", "")
    dbs = int(urlsplit(url).path.strip("/") or 0) + 1 if url else MAX_WORKERS
    return max(1, min(cpus or 1, dbs, MAX_WORKERS))
