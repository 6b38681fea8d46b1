"""LangGraph servers HITL is compared with (bench/peers.py) and reviews (tests/remote):
`langgraph dev` (langgraph-cli with the in-memory runtime) and Aegra, installed on first
use into their own venvs under bench/.peers/ and started as processes.

Pinned to this venv's langgraph version so every server runs the same graph runtime.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "bench" / ".peers"
LANGGRAPH_CLI_SPEC = "langgraph-cli[inmem]==0.4.40"
AEGRA_SPEC = "aegra-cli==0.6.0"

# Environment a peer server must not inherit: it would reach LangSmith / OTLP or
# find another server's database or broker.
_STRIP = re.compile(
    r"^(DATABASE_URL|REDIS_URL|CELERY_.*|HITL_.*|DJANGO_SETTINGS_MODULE|POSTGRES_.*|"
    r"LANGSMITH_.*|LANGCHAIN_.*|LANGGRAPH_.*|OTEL_.*|VIRTUAL_ENV|PYTHONPATH)$"
)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not _STRIP.match(k)}
    env.update(extra)
    return env


def recreate_database(base: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')
        conn.execute(f'create database "{name}"')


def wait_http(url: str, proc: subprocess.Popen | None, timeout: float, logfile: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = logfile.read_text(errors="replace")[-3000:] if logfile.exists() else ""
            raise RuntimeError(f"server exited ({proc.returncode}) before {url} answered:\n{tail}")
        with contextlib.suppress(Exception), urllib.request.urlopen(url, timeout=2) as answer:
            if answer.status < 500:
                return
        time.sleep(0.25)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f}s (log: {logfile})")


def venv_versions(venv: Path, packages: list[str]) -> str:
    code = (
        "import importlib.metadata as m\n"
        f"print(', '.join(p + ' ' + m.version(p) for p in {packages!r}))"
    )
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=False
    )
    return done.stdout.strip()


def ensure_venv(name: str, requirements: list[str]) -> Path:
    """A venv under bench/.peers/<name> holding `requirements`; installed once.

    Processes that want it at once (parallel test workers) take turns on a file lock: the
    first installs, the others then find it installed.
    """
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / f".{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _install_venv(name, requirements)


def _install_venv(name: str, requirements: list[str]) -> Path:
    venv = CACHE / name
    marker = venv / ".bench-installed"
    wanted = "\n".join(requirements)
    if marker.exists() and marker.read_text() == wanted:
        return venv
    log(f"installing {' '.join(requirements)} into {venv.relative_to(ROOT)} (first use)")
    if not (venv / "bin" / "pip").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    out = CACHE / f"{name}.install.log"
    with out.open("wb") as fh:
        done = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", *requirements],
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    if done.returncode:
        raise RuntimeError(f"pip install failed for {name}; see {out}")
    marker.write_text(wanted)
    return venv


def langgraph_dev_venv(spec: str = LANGGRAPH_CLI_SPEC) -> Path:
    return ensure_venv("langgraph-dev", [spec, f"langgraph=={version('langgraph')}"])


def aegra_venv(spec: str = AEGRA_SPEC) -> Path:
    # SQLAlchemy 2.1's asyncio extension needs greenlet, which aegra-cli does not pull in.
    return ensure_venv("aegra", [spec, "greenlet", f"langgraph=={version('langgraph')}"])


def langgraph_dev_command(
    venv: Path,
    run_dir: Path,
    graphs: dict[str, str],
    port: int,
    *,
    fresh: bool = True,
    extra: dict | None = None,
) -> tuple[list[str], dict[str, str], str]:
    """(argv, env, health URL) of `langgraph dev` serving `graphs` ({id: "file.py:attr"})
    from `run_dir`. Its in-memory state is saved there on a clean stop and read back on
    the next start unless `fresh`. `extra`: more of langgraph.json (auth, webhooks)."""
    if fresh:
        shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    config: dict = {"dependencies": ["."], "graphs": graphs, **(extra or {})}
    (run_dir / "langgraph.json").write_text(json.dumps(config, indent=2))
    env = clean_env(
        LANGSMITH_TRACING="false",
        LANGCHAIN_TRACING_V2="false",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        PYTHONUNBUFFERED="1",
    )
    argv = [
        str(venv / "bin" / "langgraph"),
        "dev",
        "--no-browser",
        "--no-reload",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--config",
        str(run_dir / "langgraph.json"),
        "--server-log-level",
        "WARNING",
    ]
    return argv, env, f"http://127.0.0.1:{port}/ok"


def aegra_command(
    venv: Path, run_dir: Path, graphs: dict[str, str], port: int, database_url: str
) -> tuple[list[str], dict[str, str], str]:
    """(argv, env, health URL) of Aegra serving `graphs` on the Postgres `database_url`."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "aegra.json").write_text(json.dumps({"graphs": graphs}, indent=2))
    env = clean_env(
        DATABASE_URL=database_url,
        AUTH_TYPE="noop",
        LOG_LEVEL="WARNING",
        OTEL_TARGETS="",
        OTEL_SDK_DISABLED="true",
        PYTHONUNBUFFERED="1",
    )
    argv = [
        str(venv / "bin" / "aegra"),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--config",
        str(run_dir / "aegra.json"),
    ]
    return argv, env, f"http://127.0.0.1:{port}/health"
