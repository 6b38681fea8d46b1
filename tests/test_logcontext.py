"""A request's log ids: its X-Request-ID and the thread id its URL names."""

from __future__ import annotations

import uuid

from django.test import RequestFactory

from hitl.logcontext import _ids_for_request, _thread_id_in


def test_a_thread_url_binds_its_thread_id_and_a_repeat_is_not_resolved_again():
    thread_id = uuid.uuid4()
    _thread_id_in.cache_clear()
    request = RequestFactory().post(
        f"/langgraph/threads/{thread_id}/runs/wait", HTTP_X_REQUEST_ID="req-1"
    )
    assert _ids_for_request(request) == {"request_id": "req-1", "thread_id": str(thread_id)}
    again = RequestFactory().get(f"/threads/{thread_id}/")
    assert _ids_for_request(again)["thread_id"] == str(thread_id)
    _ids_for_request(request)
    assert _thread_id_in.cache_info().hits == 1


def test_urls_without_a_thread_bind_none():
    for path in ("/langgraph/threads", "/inbox/", "/no/such/page"):
        ids = _ids_for_request(RequestFactory().get(path))
        assert "thread_id" not in ids and len(ids["request_id"]) == 32
