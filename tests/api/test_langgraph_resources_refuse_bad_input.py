"""The remote run webhook and the /langgraph assistants, crons and store routes refuse
bad input with a 4xx that says why, and change nothing: malformed bodies, wrong types,
NUL and surrogates, 10 MB bodies and 20k-deep nesting (tests/fuzz_bodies.py), a cron
schedule that never fires, a store filter operator the store does not have.

In-process (Django's test client), so this module runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client

from hitl.core.models import (
    Assistant,
    AssistantVersion,
    AuditEvent,
    Cron,
    RemoteDeployment,
    RemoteThread,
    Thread,
)
from hitl.core.remote.webhook import webhook_token
from hitl.core.resources.assistants import AssistantFields, assistant_create
from hitl.core.resources.crons import cron_create
from hitl.core.runs.graphs import store
from tests.api.conftest import token_for
from tests.fuzz_bodies import DEPTH, TEN_MB, deep_json, json_bodies, text_values

WRONG_VALUES: list[tuple[str, Any]] = [
    ("number", 12),
    ("string", "x"),
    ("list", [1]),
    ("object", {"a": 1}),
    ("bool", True),
    ("nul", "a\u0000b"),
    ("nul key", {"a\u0000": 1}),
]
RAW_WRONG_VALUES = [
    ("lone surrogate", '"a\\ud800b"'),
    ("surrogate key", '{"\\udfff": 1}'),
    ("deep", deep_json()),
]


@pytest.fixture
def world(admin_user, requester):
    """An assistant, a thread, a cron, a store item and a remote deployment to aim at."""
    assistant = assistant_create(
        user=admin_user, graph="approval", fields=AssistantFields(name="A")
    )
    thread = Thread.objects.create(graph="approval", requester=admin_user)
    cron = cron_create(user=admin_user, assistant_id="approval", schedule="0 9 * * *", payload={})
    store().put(("fuzz",), "k", {"v": 1}, index=False)
    deployment = RemoteDeployment.objects.create(name="prod", base_url="http://127.0.0.1:9")
    RemoteThread.objects.create(
        deployment=deployment,
        remote_thread_id="t-1",
        thread=Thread.objects.create(graph="remote:prod:review"),
    )
    return {
        "assistant": str(assistant.assistant_id),
        "thread": str(thread.pk),
        "cron": str(cron.pk),
        "webhook": f"/remote/prod/webhook/{webhook_token(deployment)}/",
    }


def _snapshot() -> tuple:
    """Everything these routes could write."""

    def rows(model):
        return sorted(json.dumps(r, sort_keys=True, default=str) for r in model.objects.values())

    items = store().search(("fuzz",), limit=100) + store().search(("x",), limit=100)
    return (
        rows(Assistant),
        rows(AssistantVersion),
        rows(Cron),
        rows(Thread),
        AuditEvent.objects.count(),
        sorted((tuple(i.namespace), i.key, json.dumps(i.value)) for i in items),
        [ns for ns in store().list_namespaces(limit=1000)],
    )


def _client(user) -> Client:
    return Client(raise_request_exception=False, HTTP_X_API_KEY=token_for(user))


def _routes(world) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, a valid body) for each route that reads a body."""
    a, t, c = world["assistant"], world["thread"], world["cron"]
    lg = "/langgraph"
    return [
        ("post", f"{lg}/assistants", {"graph_id": "approval", "name": "n"}),
        ("post", f"{lg}/assistants/search", {"metadata": {"k": 1}, "limit": 5}),
        ("post", f"{lg}/assistants/count", {"graph_id": "approval"}),
        ("patch", f"{lg}/assistants/{a}", {"name": "m", "context": {"x": 1}}),
        ("post", f"{lg}/assistants/{a}/versions", {"limit": 5}),
        ("post", f"{lg}/assistants/{a}/latest", {"version": 1}),
        ("post", f"{lg}/runs/crons", {"assistant_id": "approval", "schedule": "0 9 * * *"}),
        (
            "post",
            f"{lg}/threads/{t}/runs/crons",
            {"assistant_id": "approval", "schedule": "0 9 * * *"},
        ),
        ("post", f"{lg}/runs/crons/search", {"metadata": {"k": 1}}),
        ("post", f"{lg}/runs/crons/count", {"enabled": True}),
        ("patch", f"{lg}/runs/crons/{c}", {"schedule": "0 10 * * *"}),
        ("put", f"{lg}/store/items", {"namespace": ["x"], "key": "k", "value": {"v": 1}}),
        ("delete", f"{lg}/store/items", {"namespace": ["fuzz"], "key": "k"}),
        ("post", f"{lg}/store/items/search", {"namespace_prefix": ["fuzz"], "filter": {"v": 1}}),
        ("post", f"{lg}/store/namespaces", {"prefix": ["fuzz"]}),
        ("post", world["webhook"], {"thread_id": "t-1"}),
    ]


def _send(client: Client, method: str, path: str, raw: bytes | str):
    return getattr(client, method)(path, raw, content_type="application/json")


def test_malformed_bodies_get_a_4xx_and_change_nothing(admin_user, world):
    client = _client(admin_user)
    before = _snapshot()
    served = []
    for method, path, _ in _routes(world):
        for name, raw in json_bodies():
            response = _send(client, method, path, raw)
            served.append((response.status_code, method, path, name))
    assert [s for s in served if s[0] >= 500] == []
    assert _snapshot() == before


def test_wrong_types_nul_surrogates_and_deep_values_in_each_field_get_no_5xx(admin_user, world):
    client = _client(admin_user)
    served = []
    for method, path, valid in _routes(world):
        for field in valid:
            for name, value in WRONG_VALUES:
                body = json.dumps({**valid, field: value})
                response = _send(client, method, path, body)
                served.append((response.status_code, method, path, field, name))
            for name, raw in RAW_WRONG_VALUES:
                body = json.dumps({**valid, field: "@@"}).replace('"@@"', raw)
                response = _send(client, method, path, body)
                served.append((response.status_code, method, path, field, name))
    assert [s for s in served if s[0] >= 500] == []


def test_bad_query_parameters_get_no_5xx_and_change_nothing(admin_user, world):
    client = _client(admin_user)
    a = world["assistant"]
    before = _snapshot()
    served = []
    for name, value in [*text_values(), ("deep", deep_json()), ("huge", "x" * TEN_MB)]:
        # Percent-encoded as a client sends it (a lone surrogate as its invalid UTF-8).
        value = quote(value.encode("utf-8", "surrogatepass"), safe="")
        for method, path, params in [
            ("get", "/langgraph/store/items", {"key": value, "namespace": "fuzz"}),
            ("get", "/langgraph/store/items", {"key": "k", "namespace": value}),
            ("get", f"/langgraph/assistants/{a}/graph", {"xray": value}),
            ("get", f"/langgraph/assistants/{a}/subgraphs", {"recurse": value}),
            ("delete", f"/langgraph/assistants/{a}?delete_threads={value[:5000]}", None),
            ("get", f"/langgraph/assistants/{value[:5000]}", None),
            ("get", f"/langgraph/runs/crons/{value[:5000]}", None),
        ]:
            if params is not None:
                path += "?" + "&".join(f"{k}={v}" for k, v in params.items())
            response = getattr(client, method)(path)
            served.append((response.status_code, method, path[:80], name))
    assert [s for s in served if s[0] >= 500] == []
    assert _snapshot() == before


def test_a_cron_schedule_that_never_fires_is_refused_with_a_reason(admin_user, world):
    client = _client(admin_user)
    before = _snapshot()
    for schedule in ("0 0 31 2 *", "0 0 30 2 *"):
        made = client.post(
            "/langgraph/runs/crons",
            {"assistant_id": "approval", "schedule": schedule},
            content_type="application/json",
        )
        assert made.status_code == 400, made.content
        assert "never" in made.json()["detail"]
        changed = client.patch(
            f"/langgraph/runs/crons/{world['cron']}",
            {"schedule": schedule},
            content_type="application/json",
        )
        assert changed.status_code == 400 and "never" in changed.json()["detail"]
    assert _snapshot() == before


@pytest.mark.parametrize("operator", ["$where", "$regex", "$in", "where", "$eq "])
def test_a_store_filter_operator_it_lacks_is_a_400_naming_the_supported_ones(
    admin_user, world, operator
):
    client = _client(admin_user)
    response = client.post(
        "/langgraph/store/items/search",
        {"namespace_prefix": ["fuzz"], "filter": {"v": {operator: 1}}},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    detail = response.json()["detail"]
    assert repr(operator) in detail
    assert all(op in detail for op in ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte"))


def test_store_filter_operators_it_has_still_work(admin_user, world):
    client = _client(admin_user)
    for flt, found in [({"v": {"$gte": 1}}, 1), ({"v": {"$ne": 1}}, 0), ({"v": 1}, 1)]:
        response = client.post(
            "/langgraph/store/items/search",
            {"namespace_prefix": ["fuzz"], "filter": flt},
            content_type="application/json",
        )
        assert response.status_code == 200 and len(response.json()["items"]) == found, flt


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps({"thread_id": "t\u0000-1"}),
        '{"thread_id": "t\\ud800"}',
        '{"thread_id": ' + "[" * DEPTH + "]" * DEPTH + "}",
        '{"thread_id": "t-1", "values": ' + '{"a":' * DEPTH + "1" + "}" * DEPTH + "}",
        "[" * DEPTH + "]" * DEPTH,
    ],
    ids=["nul thread_id", "surrogate thread_id", "deep thread_id", "deep values", "deep"],
)
def test_the_remote_run_webhook_refuses_nul_and_deep_bodies(world, raw):
    before = _snapshot()
    response = Client(raise_request_exception=False).post(
        world["webhook"], raw, content_type="application/json"
    )
    assert response.status_code == 400, response.content[:300]
    assert "error" in response.json()
    assert _snapshot() == before
