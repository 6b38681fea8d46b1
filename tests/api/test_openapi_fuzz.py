"""Schemathesis against the served OpenAPI documents (v1, /langgraph, /agui): no input
gets a 5xx, and every answer matches the response schema its operation documents.

A real daphne server with runs not dispatched (HITL_EXECUTOR=manual) and a
1-second wait limit, so generated runs/wait and stream calls return quickly.
"""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error, response_schema_conformance
from schemathesis.core.failures import FailureGroup
from schemathesis.generation.modes import GenerationMode

from tests.api.conftest import start_daphne, token_for

pytestmark = pytest.mark.postgres

EXAMPLES = 8  # per operation and mode: bounded, the suite stays fast
CHECKS = [not_a_server_error, response_schema_conformance]
# Operations, cases and failures per document (and pass), printed at the module's end:
# the figures of a fuzzing round (pytest -s shows them).
FIGURES: dict[str, list[int]] = {}


@pytest.fixture(scope="module", autouse=True)
def _report_figures():
    yield
    for name, (operations, cases, failures) in FIGURES.items():
        print(f"schemathesis {name}: {operations} operations, {cases} cases, {failures} failures")


@pytest.fixture(scope="module")
def fuzz_server(test_database_url, tmp_path_factory):
    proc, base_url = start_daphne(
        test_database_url,
        tmp_path_factory.mktemp("fuzz") / "daphne.log",
        HITL_EXECUTOR="manual",
        HITL_API_WAIT_SECONDS="1",
        HITL_WEBHOOK_HOSTS="127.0.0.1",
    )
    yield base_url
    proc.stop()


def _fuzz(
    base_url: str, document: str, headers: dict[str, str], known: dict[str, str] | None = None
) -> list[str]:
    """Fuzz every operation; with `known`, path parameters of that name use real ids."""
    raw = httpx.get(f"{base_url}{document}", timeout=10).json()
    schema = schemathesis.openapi.from_dict(raw)
    failures: list[str] = []
    checked = operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        path_parameters = {k: v for k, v in (known or {}).items() if f"{{{k}}}" in operation.path}
        if known is not None and not path_parameters:
            continue  # the random pass already covered it
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            )
            @given(
                case=operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)
            )
            def check(case):
                nonlocal checked
                try:
                    response = case.call(base_url=base_url, headers=headers, timeout=15)
                except ValueError as exc:
                    # requests could not even build the request (a generated header it
                    # reads as a malformed host): nothing reached the server.
                    if "Invalid IPv6 URL" not in str(exc):
                        raise
                    return
                checked += 1
                try:
                    case.validate_response(response, checks=CHECKS, headers=headers)
                except FailureGroup as group:
                    failures.append(
                        f"{case.method} {case.formatted_path} -> {response.status_code}: "
                        f"{'; '.join(f.title for f in group.exceptions)}: {response.text[:200]}"
                    )

            try:
                check()
            except Unsatisfiable:  # nothing to get wrong (no parameters, no body)
                assert mode == GenerationMode.NEGATIVE
        operations += 1
    assert checked >= operations * EXAMPLES, "the fuzzer barely ran"
    name = document + (" (real ids)" if known else "")
    FIGURES[name] = [operations, checked, len(failures)]
    return failures


def test_the_langgraph_api_never_answers_5xx(
    fuzz_server, transactional_db, reviewer, manual_runs, api_for
):
    key = {"x-api-key": token_for(reviewer)}
    assert _fuzz(fuzz_server, "/langgraph/openapi.json", key) == []
    # Again with real ids, so generated bodies reach a thread waiting for an answer.
    started = api_for(reviewer).post("/api/v1/threads", {"graph": "approval", "input": {}}).json()
    assert manual_runs(started["run_id"]) == "interrupted"
    known = {
        "thread_id": started["thread_id"],
        "run_id": started["run_id"],
        "assistant_id": "approval",
        "checkpoint_id": httpx.get(
            f"{fuzz_server}/langgraph/threads/{started['thread_id']}/state", headers=key
        ).json()["checkpoint"]["checkpoint_id"],
    }
    assert _fuzz(fuzz_server, "/langgraph/openapi.json", key, known) == []


def test_the_ag_ui_endpoint_never_answers_5xx(fuzz_server, transactional_db, reviewer):
    key = {"x-api-key": token_for(reviewer)}
    assert _fuzz(fuzz_server, "/agui/openapi.json", key) == []
    assert _fuzz(fuzz_server, "/agui/openapi.json", key, {"graph": "client_tools"}) == []


def test_the_v1_api_never_answers_5xx(
    fuzz_server, transactional_db, reviewer, requester, manual_runs, api_for
):
    key = {"Authorization": f"Bearer {token_for(requester)}"}
    assert _fuzz(fuzz_server, "/api/v1/openapi.json", key) == []
    # Again with real ids: the requester's interrupted thread and its pending interrupt.
    started = api_for(requester).post("/api/v1/threads", {"graph": "approval", "input": {}})
    started = started.json()
    assert manual_runs(started["run_id"]) == "interrupted"
    from hitl.core.models import HumanInterrupt

    known = {
        "thread_id": started["thread_id"],
        "interrupt_id": str(HumanInterrupt.objects.get(thread_id=started["thread_id"]).pk),
    }
    assert _fuzz(fuzz_server, "/api/v1/openapi.json", key, known) == []


def _stream_case(base_url: str, document: str, path: str, headers: dict, **parts):
    """One real call of a streaming operation, checked as the fuzzer checks: its events."""
    schema = schemathesis.openapi.from_dict(httpx.get(f"{base_url}{document}").json())
    method = "GET" if "body" not in parts else "POST"
    case = schema[document.rsplit("/", 1)[0] + path][method].Case(**parts)
    response = case.call(base_url=base_url, headers=headers, timeout=15)
    assert response.status_code == 200, response.text[:300]
    assert response.headers["content-type"][0].startswith("text/event-stream")
    assert "data:" in response.text
    case.validate_response(response, checks=CHECKS, headers=headers)
    return response


def test_every_event_stream_matches_its_documented_event_schema(
    fuzz_server, transactional_db, reviewer, manual_runs, api_for
):
    """The random pass rarely reaches a 200 stream: each streaming operation, once, for real."""
    key = {"x-api-key": token_for(reviewer)}
    started = api_for(reviewer).post("/api/v1/threads", {"graph": "approval", "input": {}}).json()
    assert manual_runs(started["run_id"]) == "interrupted"
    thread, run = started["thread_id"], started["run_id"]
    doc = "/langgraph/openapi.json"
    _stream_case(
        fuzz_server, doc, "/threads/{thread_id}/runs/{run_id}/stream", key,
        path_parameters={"thread_id": thread, "run_id": run},
    )  # fmt: skip
    _stream_case(
        fuzz_server, doc, "/threads/{thread_id}/runs/stream", key,
        path_parameters={"thread_id": thread},
        body={"assistant_id": "approval", "command": {"resume": {"type": "accept"}}},
    )  # fmt: skip
    _stream_case(
        fuzz_server, doc, "/runs/stream", key, body={"assistant_id": "approval", "input": {}}
    )
    stream = _stream_case(
        fuzz_server, "/agui/openapi.json", "/{graph}", key,
        path_parameters={"graph": "approval"},
        body={"threadId": "", "runId": "", "messages": [], "state": {}, "tools": [],
              "context": [], "forwardedProps": {}},
    )  # fmt: skip
    assert "RUN_STARTED" in stream.text
