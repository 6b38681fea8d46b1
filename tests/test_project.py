"""Project hygiene that CI enforces: migrations match the models, ruff is clean."""

import subprocess
import sys
from io import StringIO
from pathlib import Path

from django.core.management import call_command

ROOT = Path(__file__).resolve().parent.parent


def test_models_have_no_missing_migrations(db):
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def test_ruff_finds_no_lint_or_format_problems():
    ruff = [sys.executable, "-m", "ruff"]
    lint = subprocess.run([*ruff, "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    fmt = subprocess.run(
        [*ruff, "format", "--check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert fmt.returncode == 0, fmt.stdout
