"""Token auth answers repeats from memory and forgets what changed."""

from __future__ import annotations

import pytest

from hitl.api.tokens import user_for_key
from hitl.core.models import ApiToken

pytestmark = pytest.mark.django_db


def test_a_known_token_costs_no_query_and_gives_a_fresh_user(requester, django_assert_num_queries):
    _, key = ApiToken.issue(user=requester)
    with django_assert_num_queries(2):  # the lookup, and last_used_at once a minute
        first = user_for_key(key)
    with django_assert_num_queries(0):
        again = user_for_key(key)
    assert first.pk == again.pk == requester.pk
    # Each request gets its own instance: no permission cache crosses requests.
    first.has_perm("hitl.review_all")
    assert again is not first and not hasattr(again, "_perm_cache")
    assert again.username == requester.username and again.is_active


def test_a_deleted_token_or_deactivated_user_is_refused_at_once(requester, reviewer, api_for):
    token, key = ApiToken.issue(user=requester)
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    client = api_for()
    assert client.client.get("/api/v1/graphs", **headers).status_code == 200
    token.delete()
    assert client.client.get("/api/v1/graphs", **headers).status_code == 401

    _, key = ApiToken.issue(user=reviewer)
    assert user_for_key(key).pk == reviewer.pk
    reviewer.is_active = False
    reviewer.save(update_fields=["is_active"])
    assert user_for_key(key) is None
    response = client.client.post(
        "/langgraph/threads/search", "{}", content_type="application/json", HTTP_X_API_KEY=key
    )
    assert response.status_code == 401
