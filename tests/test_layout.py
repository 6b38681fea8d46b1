"""The layout holds: imports only point down, and the app label and tables carried over."""

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
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


def _late_imports_of_own_modules(path: Path) -> list[str]:
    """`path:function:line: import` for each import of hitl/agents inside a function of `path`
    (an AppConfig's ready() aside)."""
    tree = ast.parse(path.read_text())
    found = []

    def visit(node: ast.AST, function: str | None, in_app_config: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                bases = {getattr(base, "id", getattr(base, "attr", "")) for base in child.bases}
                visit(child, function, "AppConfig" in bases)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                if in_app_config and child.name == "ready" and function is None:
                    continue  # apps.ready() is where Django wants its late imports
                visit(child, function or child.name, False)
            elif function is not None and isinstance(child, ast.Import | ast.ImportFrom):
                names = (
                    [alias.name for alias in child.names]
                    if isinstance(child, ast.Import)
                    else ["." if child.level else (child.module or "")]
                )
                own = [n for n in names if n == "." or n.split(".")[0] in ("hitl", "agents")]
                if own:
                    where = f"{path.relative_to(ROOT)}:{function}:{child.lineno}"
                    found.append(f"{where}: {ast.unparse(child)}")
            else:
                visit(child, function, in_app_config)

    visit(tree, None, False)
    return found


def test_no_room_imports_its_own_modules_inside_a_function():
    """Order problems are solved by the layers, not dodged inside functions: in every
    room (the project, review, api, ops, compat, core and agents). The one exception is
    an AppConfig's ready(), where Django wants its late imports; the project modules
    need none (settings imports nothing of ours, asgi imports after django.setup() at
    module level, and the Celery app's imports are plain top-level ones)."""
    offenders = []
    for room in ("hitl", "agents"):
        for path in sorted((ROOT / room).rglob("*.py")):
            if "migrations" not in path.parts:
                offenders += _late_imports_of_own_modules(path)
    assert offenders == []


def test_a_late_import_outside_ready_is_caught(tmp_path, monkeypatch):
    """The check is not vacuous: a late import in a view and in an AppConfig helper is
    caught, the one in ready() is not."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    probe = tmp_path / "hitl" / "ops" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "from django.apps import AppConfig\n\n\n"
        "def view():\n    from hitl.core.runs.graphs import checkpointer\n\n\n"
        "class ProbeConfig(AppConfig):\n"
        "    def ready(self):\n        from hitl.core.live import events\n\n"
        "    def helper(self):\n        from . import views\n"
    )
    assert _late_imports_of_own_modules(probe) == [
        "hitl/ops/probe.py:view:5: from hitl.core.runs.graphs import checkpointer",
        "hitl/ops/probe.py:helper:13: from . import views",
    ]


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


def _modules_matching(pattern: str) -> set[str]:
    """The modules of hitl/ whose text matches `pattern` (migrations aside)."""
    found = set()
    for path in (ROOT / "hitl").rglob("*.py"):
        if "migrations" not in path.parts and re.search(pattern, path.read_text()):
            found.add(str(path.relative_to(ROOT)))
    return found


def test_the_executor_setting_is_read_in_one_module():
    """Everything else asks hitl/core/later.py what "later" means."""
    assert _modules_matching(r"HITL_EXECUTOR") - {"hitl/settings.py"} == {"hitl/core/later.py"}


def test_changes_are_published_only_through_send_event_on_commit():
    """No service calls a publisher itself: announcing waits for the commit, one way."""
    publishers = r"publish_(interrupt_changed|interrupt_progress|thread_changed)\("
    assert _modules_matching(publishers) == {"hitl/core/live/events.py"}


# Test files that stay at tests/core because what they check crosses sub-rooms.
CORE_TESTS_ACROSS_ROOMS = {
    "test_query_counts.py": "caps the statements of the whole review cycle: start, lease, answer, reads",
    "test_later.py": "checks hitl/core/later.py, a leaf module at the top of core, not a sub-room",
}


def _misplaced_core_tests(tests_core: Path, rooms: set[str]) -> list[str]:
    """Files under tests/core outside a folder named after a hitl/core sub-room."""
    misplaced = []
    for path in sorted(tests_core.rglob("*.py")):
        relative = path.relative_to(tests_core)
        if len(relative.parts) == 1:
            if relative.name in {"__init__.py", "conftest.py"} | set(CORE_TESTS_ACROSS_ROOMS):
                continue
        # Test folders are packages: two rooms may then hold files of the same name.
        elif relative.parts[0] in rooms and (path.parent / "__init__.py").exists():
            continue
        misplaced.append(str(relative))
    return misplaced


def _core_sub_rooms() -> set[str]:
    core = ROOT / "hitl" / "core"
    return {path.parent.name for path in core.glob("*/__init__.py")}


def test_core_tests_live_in_the_sub_room_of_the_code_they_check():
    assert _misplaced_core_tests(ROOT / "tests" / "core", _core_sub_rooms()) == []


def test_a_flat_or_unknown_core_test_is_named(tmp_path):
    """The check is not vacuous: a file at the top, in a made-up room or a folder that is
    not a package is reported."""
    for name in ("__init__.py", "conftest.py", "test_query_counts.py", "test_flat.py"):
        (tmp_path / name).touch()
    for room in ("decisions", "nowhere", "worker"):
        (tmp_path / room).mkdir()
        (tmp_path / room / "test_x.py").touch()
    (tmp_path / "decisions" / "__init__.py").touch()
    (tmp_path / "nowhere" / "__init__.py").touch()
    assert _misplaced_core_tests(tmp_path, _core_sub_rooms()) == [
        "nowhere/__init__.py",
        "nowhere/test_x.py",
        "test_flat.py",
        "worker/test_x.py",
    ]
    assert CORE_TESTS_ACROSS_ROOMS.keys() <= {p.name for p in (ROOT / "tests" / "core").iterdir()}


MAX_PARAMETERS = 8


def _parameter_count(node) -> int:
    """Positional and keyword-only parameters, self/cls left out, *args and **kwargs one each."""
    arguments = node.args
    names = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    count = len(names) + len(arguments.kwonlyargs)
    return count + (arguments.vararg is not None) + (arguments.kwarg is not None)


def test_no_function_in_hitl_or_agents_takes_more_than_eight_parameters():
    """Past eight parameters a function is missing a type for what it carries."""
    import ast

    offenders = []
    for room in ("hitl", "agents"):
        for path in sorted((ROOT / room).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    count = _parameter_count(node)
                    if count > MAX_PARAMETERS:
                        where = f"{path.relative_to(ROOT)}:{node.lineno}"
                        offenders.append(f"{where} {node.name} ({count})")
    assert offenders == []


def test_who_answered_is_worded_in_one_place():
    """The conflict messages, the Slack message and the reviewer card name who answered
    through HumanInterrupt.answered_by."""
    assert _modules_matching(r"rule \{\w+\.decided_by_rule\}") == {"hitl/core/models/interrupts.py"}


def _core_layers() -> set[str]:
    """The sub-room names in the contract that orders hitl/core's sub-rooms."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract.get("containers") == ["hitl.core"]:
            return {name.strip() for layer in contract["layers"] for name in layer.split("|")}
    return set()


def test_every_sub_room_of_core_has_its_layer():
    """A new sub-room of core is placed in the contract, or nothing checks its imports."""
    core = ROOT / "hitl" / "core"
    rooms = {p.name for p in core.iterdir() if (p / "__init__.py").exists()}
    rooms |= {p.stem for p in core.glob("*.py") if p.name != "__init__.py"}
    assert rooms - {"migrations"} - _core_layers() == set()


def test_the_models_index_only_re_exports_the_subject_modules():
    """Models live in a module per subject; models/__init__.py imports them, at the top."""
    tree = ast.parse((ROOT / "hitl" / "core" / "models" / "__init__.py").read_text())
    body = tree.body[1:] if ast.get_docstring(tree) else tree.body
    kinds = [type(node).__name__ for node in body]
    assert set(kinds) <= {"ImportFrom", "Assign"}, kinds
    assert kinds.index("Assign") == len(kinds) - 1, "only __all__ follows the imports"
    for node in body[:-1]:
        assert node.module.startswith("hitl.core.models."), node.module
