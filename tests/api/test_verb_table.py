"""The verb table (docs/langgraph-api.md) covers every call and parameter of the installed
langgraph_sdk, and every test it names exists and makes that call."""

from __future__ import annotations

import ast
import inspect
import re
from functools import cache
from pathlib import Path

from langgraph_sdk import get_client, get_sync_client

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "langgraph-api.md"
GROUPS = ("assistants", "threads", "runs", "crons", "store")
# Every call takes these; the table has one row for them, named EVERY_CALL.
TRANSPORT = {"self", "headers", "params"}
EVERY_CALL = "every call"
STATUSES = ("yes", "partly", "refused")
TEST_ID = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _sdk_calls() -> dict[str, set[str]]:
    """Every public method of the sync and async clients, with its parameters."""
    calls: dict[str, set[str]] = {}
    for client in (get_sync_client(url="http://sdk.invalid"), get_client(url="http://sdk.invalid")):
        for group in GROUPS:
            for name, method in inspect.getmembers(
                type(getattr(client, group)), inspect.isfunction
            ):
                if not name.startswith("_"):
                    params = set(inspect.signature(method).parameters) - TRANSPORT
                    calls.setdefault(f"{group}.{name}", set()).update(params)
    return calls


@cache
def table_rows() -> list[tuple[str, str, str, str]]:
    """The verb table's rows: (calls, parameters, status, tests) cells."""
    page = PAGE.read_text()
    section = page.split("## Verb table", 1)[1]
    section = re.split(r"\n#{2,3} ", section, maxsplit=1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith(("| call", "|---")):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 4, f"a verb table row needs 4 cells: {line}"
        rows.append(tuple(cells))
    return rows


def _row_calls(cell: str) -> list[str]:
    if cell == EVERY_CALL:
        return [EVERY_CALL]
    return re.findall(r"`([a-z_]+\.[a-z_]+)`", cell)


def _backticked(cell: str) -> set[str]:
    return set(re.findall(r"`([a-z_]+)`", cell))


@cache
def _test_functions(path: str) -> dict[str, str]:
    """The test functions of a test module, each with its source."""
    source = (ROOT / path).read_text()
    tree = ast.parse(source)
    return {
        node.name: ast.get_source_segment(source, node) or ""
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def test_every_sdk_call_and_parameter_has_a_row():
    rows = table_rows()
    covered: dict[str, set[str]] = {}
    for calls, params, _, _ in rows:
        for call in _row_calls(calls):
            assert call not in covered, f"{call} has two rows"
            covered[call] = _backticked(params)
    assert covered.get(EVERY_CALL) == {"headers", "params"}
    missing = []
    for call, params in sorted(_sdk_calls().items()):
        if call not in covered:
            missing.append(call)
        else:
            missing += [f"{call}({p})" for p in sorted(params - covered[call])]
    assert not missing, f"the verb table misses {missing}"
    unknown = set(covered) - set(_sdk_calls()) - {EVERY_CALL}
    assert not unknown, f"the verb table names calls langgraph_sdk does not have: {unknown}"


def test_every_row_has_a_status_and_tests_that_exist_and_make_its_call():
    for calls, _, status, tests in table_rows():
        assert status.startswith(STATUSES), f"{calls}: status must start with {STATUSES}"
        named = TEST_ID.findall(tests)
        assert named, f"{calls}: no test named"
        sources = []
        for path, name in named:
            assert (ROOT / path).is_file(), f"{calls}: no file {path}"
            functions = _test_functions(path)
            assert name in functions, f"{calls}: {path} has no test {name}"
            sources.append(functions[name])
        for call in _row_calls(calls):
            if call == EVERY_CALL:
                continue
            method = call.split(".")[1]
            assert any(f".{method}(" in s for s in sources), (
                f"{calls}: none of its tests calls .{method}("
            )


def test_the_table_counts_are_what_the_page_says():
    counts = {s: 0 for s in STATUSES}
    for _, _, status, _ in table_rows():
        counts[next(s for s in STATUSES if status.startswith(s))] += 1
    stated = re.search(r"(\d+) rows: (\d+) yes, (\d+) partly, (\d+) refused", PAGE.read_text())
    assert stated, "the page states the verb table's counts"
    assert [int(n) for n in stated.groups()] == [len(table_rows()), *counts.values()]
