"""Starting a run on an existing thread is the requester's (or needs hitl.run_any_thread):
on every surface that starts runs (v1, /langgraph, /agui). Viewing is not enough: a
reviewer (of its group or, with hitl.review_all, of every group) sees the thread but gets
403 and nothing is created.
In-process; runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from hitl.core.models import Run, Thread
from tests.api.conftest import token_for


@pytest.fixture
def finished(requester, reviewers_group):
    """A done thread the reviewers' group can see (its requester: quinn)."""
    return Thread.objects.create(
        graph="approval", requester=requester, reviewer_group=reviewers_group, status="done"
    )


@pytest.fixture
def all_reviewer(db):
    from tests.conftest import _make_user

    user = _make_user("alma")
    user.user_permissions.add(Permission.objects.get(codename="review_all"))
    return user


def start_run(surface: str, user, thread: Thread):
    client = Client()
    key = {"HTTP_X_API_KEY": token_for(user)}
    if surface == "v1":
        path, body = f"/api/v1/threads/{thread.pk}/runs", {"input": {"request": "again"}}
    elif surface == "langgraph":
        path = f"/langgraph/threads/{thread.pk}/runs"
        body = {"assistant_id": "approval", "input": {"request": "again"}}
    else:
        path = "/agui/approval"
        body = {"threadId": str(thread.pk), "runId": "r9", "messages": [], "state": {}}
    return client.post(path, json.dumps(body), content_type="application/json", **key)


SURFACES = ["v1", "langgraph", "agui"]


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("who", ["reviewer", "all_reviewer"])
def test_a_viewer_cannot_start_a_run_on_someone_elses_thread(
    surface, who, finished, manual_runs, request
):
    user = request.getfixturevalue(who)
    response = start_run(surface, user, finished)
    assert response.status_code == 403, response.content
    assert "requester" in response.json()["detail"]
    assert not Run.objects.filter(thread=finished).exists()
    finished.refresh_from_db()
    assert finished.status == "done"


@pytest.mark.parametrize("surface", SURFACES)
def test_the_requester_starts_a_run_on_their_thread(surface, finished, requester, manual_runs):
    response = start_run(surface, requester, finished)
    assert response.status_code in (200, 201), response.content
    assert Run.objects.filter(thread=finished).count() == 1


@pytest.mark.parametrize("surface", SURFACES)
def test_the_explicit_permission_allows_it(surface, finished, reviewer, manual_runs):
    reviewer.user_permissions.add(Permission.objects.get(codename="run_any_thread"))
    response = start_run(surface, reviewer, finished)
    assert response.status_code in (200, 201), response.content
    assert Run.objects.filter(thread=finished).count() == 1
