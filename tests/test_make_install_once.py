"""`make run` installs into .venv once per pyproject.toml: a restart skips pip. Checked
with `make -n` (what make would run) against a stand-in venv, so nothing is installed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import ROOT


def planned(target: str, venv: Path) -> str:
    """The commands `make <target>` would run with this venv."""
    done = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_make_run_installs_once_per_pyproject_and_again_when_it_changes(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    assert "pip install -q -e ." in planned("run", venv)  # a new venv: install

    stamp = venv / ".hitl-installed"
    stamp.touch()
    again = planned("run", venv)
    assert "pip install" not in again  # installed: straight to the server
    assert "manage.py migrate" in again and "-m hitl.web" in again

    edited = (ROOT / "pyproject.toml").stat().st_mtime + 10
    os.utime(stamp, (edited - 20, edited - 20))  # pyproject.toml is newer than the stamp
    assert "pip install -q -e ." in planned("run", venv)


def test_make_test_installs_dev_deps_once_and_that_counts_for_make_run(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    assert "pip install -q -e '.[dev]'" in planned("install-dev", venv)
    (venv / ".hitl-installed-dev").touch()
    (venv / ".hitl-installed").touch()
    assert "pip install" not in planned("install-dev", venv)
    assert "pip install" not in planned("install", venv)
