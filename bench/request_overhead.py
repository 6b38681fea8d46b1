"""What one HTTP request costs daphne before and around its view.

Starts daphne twice on the same settings, interleaved for a few rounds: once with
HITL's ASGI application (hitl/asgi.py: Django's middleware called inline, request threads
reused; hitl/middleware.py) and once with Django's stock ASGI handler
(bench/stock_asgi.py). Each is driven with keep-alive GETs of a trivial endpoint
(`/langgraph/ok`, no database) by one client; the figure is daphne's own CPU
(/proc utime+stime) per request.

    .venv/bin/python bench/request_overhead.py --requests 1500 --rounds 3

Prints figures; it is not a test. Uses no database or Redis beyond what settings
read at start (SQLite in a temp dir, in-memory channel layer).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
APPS = {"hitl (inline)": "hitl.asgi:application", "django stock": "bench.stock_asgi:application"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def measure(app: str, path: str, requests: int, workdir: str) -> tuple[float, float]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(HITL_VAR_DIR=workdir, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [str(BIN / "python"), "-m", "hitl.web", "-b", "127.0.0.1", "-p", str(port), app],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}{path}"
    try:
        with httpx.Client() as client:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if client.get(url).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{app} did not answer {path}")
                time.sleep(0.1)
            for _ in range(100):  # warm
                client.get(url)
            before, began = cpu_ms(proc.pid), time.perf_counter()
            for _ in range(requests):
                client.get(url)
            elapsed = time.perf_counter() - began
            return (cpu_ms(proc.pid) - before) / requests, requests / elapsed
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--path", default="/langgraph/ok")
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in APPS}
    with tempfile.TemporaryDirectory() as workdir:
        subprocess.run(
            [str(BIN / "python"), "manage.py", "migrate", "--noinput", "-v0"],
            cwd=ROOT,
            env={**os.environ, "HITL_VAR_DIR": workdir, "DATABASE_URL": "", "REDIS_URL": ""},
            check=True,
        )
        for round_no in range(1, args.rounds + 1):
            for name, app in APPS.items():
                cpu, rate = measure(app, args.path, args.requests, workdir)
                results[name].append((cpu, rate))
                print(f"round {round_no} {name:<14} {cpu:.2f} ms CPU/request, {rate:.0f} req/s")
    print(f"\n{os.cpu_count()} cores, {args.requests} GETs of {args.path} per measurement")
    print(f"{'application':<14} {'CPU ms/request (median)':>24} {'requests/s (median)':>20}")
    for name, rows in results.items():
        cpu = statistics.median(r[0] for r in rows)
        rate = statistics.median(r[1] for r in rows)
        print(f"{name:<14} {cpu:>24.2f} {rate:>20.0f}")


if __name__ == "__main__":
    main()
