"""The JSON API refuses bad input with a clear 4xx JSON error, never a 500."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from hitl.core import runs
from hitl.core.models import HumanInterrupt, Run, Thread

pytestmark = pytest.mark.postgres


@pytest.fixture
def api(api_for, requester):
    return api_for(requester)


@pytest.fixture
def interrupted(manual_runs, requester):
    """An approval thread paused on its interrupt."""
    run = runs.run_start(graph="approval", input={}, user=requester)
    assert manual_runs(run) == "interrupted"
    return Thread.objects.get(pk=run.thread_id)


def assert_error(response, status: int, detail: str = "") -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert isinstance(body["detail"], str) and body["detail"]
    assert detail in body["detail"]
    return body


def test_start_and_read_a_thread(api, manual_runs):
    started = api.post("/api/v1/threads", {"graph": "approval", "input": {"request": "x"}})
    assert started.status_code == 201
    body = started.json()
    assert manual_runs(body["run_id"]) == "interrupted"
    detail = api.get(f"/api/v1/threads/{body['thread_id']}").json()
    assert detail["status"] == "interrupted"
    assert detail["interrupts"][0]["action_request"]["args"]["subject"] == "Re: x"


@pytest.mark.parametrize(
    "raw", ['{"graph": "approval",', "not json", "", '"just a string"', "[1, 2]", "\xff"]
)
def test_malformed_json_is_a_client_error(api, raw):
    response = api.post("/api/v1/threads", raw=raw)
    assert 400 <= response.status_code < 500, response.content
    assert isinstance(response.json()["detail"], str)
    assert not Thread.objects.exists()


def test_unknown_graph_is_refused(api):
    body = assert_error(api.post("/api/v1/threads", {"graph": "nope"}), 400, "Unknown graph 'nope'")
    assert "approval" in body["detail"]  # names what exists
    assert not Thread.objects.exists()


@pytest.mark.parametrize("value", [[1, 2], "text", 3, True])
def test_non_object_input_is_refused(api, value):
    response = api.post("/api/v1/threads", {"graph": "approval", "input": value})
    assert_error(response, 422, "input")
    assert not Thread.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "graph"),
        ({"graph": 5}, "graph"),
        ({"graph": "approval", "metadata": []}, "metadata"),
    ],
)
def test_missing_or_mistyped_fields_are_named(api, body, field):
    assert_error(api.post("/api/v1/threads", body), 422, field)


def test_unknown_reviewer_group_is_refused(api):
    response = api.post("/api/v1/threads", {"graph": "approval", "reviewer_group": "nobody"})
    assert_error(response, 400, "Unknown reviewer group 'nobody'")
    assert not Thread.objects.exists()


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"HTTP_AUTHORIZATION": "Bearer hitl_wrong"},
        {"HTTP_AUTHORIZATION": "Basic dXNlcjpwdw=="},
        {"HTTP_X_API_KEY": "hitl_wrong"},
    ],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/api/v1/threads"),
        ("get", "/api/v1/interrupts"),
        ("get", f"/api/v1/threads/{uuid.UUID(int=1)}"),  # none such; stable for xdist
        ("post", f"/api/v1/interrupts/{uuid.UUID(int=2)}/decision"),
    ],
)
def test_missing_or_wrong_credentials_get_401(db, headers, method, path):
    client = Client(enforce_csrf_checks=True)
    call = getattr(client, method)
    kwargs = {"content_type": "application/json"} if method == "post" else {}
    data = json.dumps({"graph": "approval", "type": "accept"}) if method == "post" else None
    response = call(path, data, **kwargs, **headers)
    assert_error(response, 401, "Authentication required")
    assert not Thread.objects.exists()


def test_x_api_key_header_works(api_for, requester, db):
    from hitl.core.models import ApiToken

    _, key = ApiToken.issue(user=requester)
    response = Client().get("/api/v1/graphs", HTTP_X_API_KEY=key)
    assert response.status_code == 200
    assert "approval" in response.json()


def test_a_logged_in_browser_still_needs_csrf_for_posts(requester):
    client = Client(enforce_csrf_checks=True)
    client.force_login(requester)
    assert client.get("/api/v1/graphs").status_code == 200
    response = client.post(
        "/api/v1/threads", json.dumps({"graph": "approval"}), content_type="application/json"
    )
    assert_error(response, 403, "CSRF")
    assert not Thread.objects.exists()


def test_another_users_thread_is_not_found(interrupted, api_for, outsider):
    other = api_for(outsider)
    assert_error(other.get(f"/api/v1/threads/{interrupted.pk}"), 404, "No such thread")
    assert_error(other.post(f"/api/v1/threads/{interrupted.pk}/cancel"), 404, "No such thread")
    assert_error(other.post(f"/api/v1/threads/{interrupted.pk}/runs"), 404, "No such thread")
    run = interrupted.runs.get()
    assert_error(other.get(f"/api/v1/runs/{run.pk}"), 404, "No such run")
    row = interrupted.interrupts.get()
    assert_error(other.get(f"/api/v1/interrupts/{row.pk}"), 404)
    assert_error(
        other.post(f"/api/v1/interrupts/{row.pk}/decision", {"type": "accept"}),
        404,
        "No such interrupt",
    )
    assert other.get("/api/v1/interrupts").json() == []
    interrupted.refresh_from_db()
    assert interrupted.status == "interrupted"


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/threads/not-a-uuid",
        "/api/v1/runs/123",
        "/api/v1/interrupts/xyz",
        "/api/v1/interrupts/xyz/decision",
    ],
)
def test_malformed_ids_and_unknown_paths_are_json_404s(api, path):
    response = api.post(path, {"type": "accept"}) if path.endswith("decision") else api.get(path)
    assert_error(response, 404)


def test_oversized_body_is_413(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = {"graph": "approval", "input": {"request": "x" * 20_000}}
    assert_error(api.post("/api/v1/threads", body), 413, "too large")
    assert not Thread.objects.exists()


@pytest.mark.parametrize(
    ("decision", "status", "detail"),
    [
        ({"type": "approve"}, 400, "Unknown decision type 'approve'"),
        (
            {"type": "edit", "args": {"args": {"to": "ab@c", "subject": "s", "copies": "two"}}},
            400,
            "schema at copies: 'two' is not of type 'integer'",
        ),
        ({"type": "edit", "args": '{"args": '}, 400, "not valid JSON"),
        ({"type": "response", "args": ""}, 400, "non-empty text"),
        ({"type": "response", "args": {"text": "x"}}, 400, "non-empty text"),
        ({"args": "x"}, 422, "type"),
        ({"type": ["accept"]}, 422, "type"),
    ],
)
def test_wrong_decisions_are_refused_and_change_nothing(
    interrupted, api_for, reviewer, decision, status, detail
):
    row = interrupted.interrupts.get()
    response = api_for(reviewer).post(f"/api/v1/interrupts/{row.pk}/decision", decision)
    assert_error(response, status, detail)
    row.refresh_from_db()
    assert (row.status, row.response_type, row.responded_by) == ("pending", "", None)
    assert not Run.objects.filter(thread=interrupted, kind="resume").exists()


def test_decision_conflicts_are_409(interrupted, api_for, reviewer, second_reviewer):
    row = interrupted.interrupts.get()
    assert api_for(reviewer).post(f"/api/v1/interrupts/{row.pk}/decision", {"type": "accept"})
    late = api_for(second_reviewer).post(
        f"/api/v1/interrupts/{row.pk}/decision", {"type": "ignore"}
    )
    assert_error(late, 409, "Already answered by rita")
    assert HumanInterrupt.objects.get(pk=row.pk).response_type == "accept"


def test_requester_outside_the_group_gets_403_on_decide(interrupted, api):
    row = interrupted.interrupts.get()
    response = api.post(f"/api/v1/interrupts/{row.pk}/decision", {"type": "accept"})
    assert_error(response, 403, "reviewer group")


def test_new_run_on_an_interrupted_thread_is_409(interrupted, api):
    response = api.post(f"/api/v1/threads/{interrupted.pk}/runs", {"input": {}})
    assert_error(response, 409, "interrupted")


@pytest.mark.parametrize("query", [{"limit": "many"}, {"limit": "-5"}, {"status": "bogus"}])
def test_odd_list_parameters_never_fail_with_500(api_for, reviewer, query):
    response = api_for(reviewer).get("/api/v1/interrupts", **query)
    assert response.status_code in (200, 422), response.content


def test_nul_characters_are_refused_before_reaching_postgres(api, manual_runs):
    threads_before = Thread.objects.count()
    response = api.post("/api/v1/threads", {"graph": "approval", "input": {"request": "a\u0000b"}})
    assert response.status_code == 400
    assert "NUL" in response.json()["detail"]
    assert Thread.objects.count() == threads_before


def test_nul_characters_in_an_answer_change_nothing(interrupted, api):
    row = HumanInterrupt.objects.get(thread=interrupted)
    response = api.post(
        f"/api/v1/interrupts/{row.pk}/decision", {"type": "response", "args": "x\u0000"}
    )
    assert response.status_code == 400
    row.refresh_from_db()
    assert row.status == HumanInterrupt.Status.PENDING
    assert not Run.objects.filter(thread_id=row.thread_id, kind="resume").exists()
