"""A request's log ids: its X-Request-ID and the thread id its URL names."""

from __future__ import annotations

import uuid

from django.test import RequestFactory

from hitl.logcontext import _ids_for_request
from hitl.middleware import ASGIHandler


def _handler() -> ASGIHandler:
    return object.__new__(ASGIHandler)  # its resolve_request alone: no middleware loaded


def test_a_thread_url_binds_its_thread_id_and_the_handler_does_not_resolve_it_again():
    thread_id = uuid.uuid4()
    request = RequestFactory().post(
        f"/langgraph/threads/{thread_id}/runs/wait", HTTP_X_REQUEST_ID="req-1"
    )
    assert _ids_for_request(request) == {"request_id": "req-1", "thread_id": str(thread_id)}
    kept = request._hitl_match[2]
    assert kept.url_name == "runs_wait" and kept.kwargs["thread_id"] == str(thread_id)
    assert _handler().resolve_request(request) is kept
    assert request.resolver_match is kept
    again = RequestFactory().get(f"/threads/{thread_id}/")
    assert _ids_for_request(again)["thread_id"] == str(thread_id)
    assert _handler().resolve_request(again).url_name == "thread"


def test_the_handler_resolves_again_a_path_or_urlconf_changed_since():
    thread_id = uuid.uuid4()
    request = RequestFactory().get(f"/threads/{thread_id}/")
    _ids_for_request(request)
    kept = request._hitl_match[2]
    request.path_info = "/langgraph/threads"
    found = _handler().resolve_request(request)
    assert found is not kept and found.url_name == "threads_create"
    request = RequestFactory().get(f"/threads/{thread_id}/")
    _ids_for_request(request)
    request.urlconf = "hitl.urls"
    found = _handler().resolve_request(request)
    assert found is not request._hitl_match[2] and found.url_name == "thread"


def test_urls_without_a_thread_bind_none():
    for path in ("/langgraph/threads", "/inbox/", "/no/such/page"):
        ids = _ids_for_request(RequestFactory().get(path))
        assert "thread_id" not in ids and len(ids["request_id"]) == 32
