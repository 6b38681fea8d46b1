"""The layout holds: imports only point down, and the app label and tables carried over."""

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


def test_a_wrong_way_import_breaks_the_contract(tmp_path):
    """The contract is not vacuous: core importing the reviewer app is caught."""
    offender = ROOT / "hitl" / "core" / "_layer_probe.py"
    offender.write_text("from hitl.review import fragments  # noqa: F401\n")
    try:
        result = subprocess.run(
            [str(LINT_IMPORTS), "--no-cache"], cwd=ROOT, capture_output=True, text=True
        )
    finally:
        offender.unlink()
    assert result.returncode != 0
    assert "hitl.core._layer_probe -> hitl.review.fragments" in result.stdout


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
