"""The layout holds: imports only point down, and the app label and tables carried over."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from django.apps import apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def test_import_contracts_are_kept():
    result = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def _lint_copy(tmp_path: Path, probe: str, text: str) -> subprocess.CompletedProcess:
    """lint-imports over a copy of the tree with one probe module added (the tree stays as is)."""
    for name in ("hitl", "agents"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / probe).write_text(text)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=tmp_path, capture_output=True, text=True, env=env
    )


def test_a_wrong_way_import_breaks_the_contract(tmp_path):
    """The contract is not vacuous: core importing the reviewer app is caught."""
    result = _lint_copy(
        tmp_path, "hitl/core/_layer_probe.py", "from hitl.review import fragments  # noqa: F401\n"
    )
    assert result.returncode != 0
    assert "hitl.core._layer_probe -> hitl.review.fragments" in result.stdout
    assert not (ROOT / "hitl" / "core" / "_layer_probe.py").exists()


def test_a_sub_room_importing_one_above_it_breaks_the_core_contract(tmp_path):
    """Inside core too: the run machinery reaching up into the worker is caught."""
    result = _lint_copy(
        tmp_path, "hitl/core/runs/_probe.py", "from hitl.core.worker import tasks  # noqa: F401\n"
    )
    assert result.returncode != 0
    assert "hitl.core.runs._probe -> hitl.core.worker.tasks" in result.stdout


def test_core_has_no_function_level_imports_of_its_own_modules():
    """Order problems are solved by the layers, not dodged inside functions."""
    offenders = []
    for path in (ROOT / "hitl" / "core").rglob("*.py"):
        if "migrations" in path.parts or path.name == "apps.py":
            continue  # apps.ready() is where Django wants its late imports
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.startswith((" ", "\t")) and line.strip().startswith(
                ("from hitl", "import hitl")
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_models_keep_the_hitl_label_and_tables():
    config = apps.get_app_config("hitl")
    assert config.name == "hitl.core"
    tables = {model._meta.db_table for model in config.get_models()}
    assert {"hitl_thread", "hitl_run", "hitl_humaninterrupt", "hitl_artifact"} <= tables


def test_a_database_migrated_before_the_move_has_nothing_to_apply(db):
    executor = MigrationExecutor(connection)
    applied = {key for key in executor.loader.applied_migrations if key[0] == "hitl"}
    # The names an existing install recorded in django_migrations are the ones we ship.
    assert ("hitl", "0001_initial") in applied
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []
