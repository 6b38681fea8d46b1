"""Metadata filters of threads.search/count and crons.search/count are data: each key is
matched literally, by JSON containment, as LangGraph Server does. A key shaped like an
ORM lookup (`a__in`, `y__regex`, `a__isnull`) is just a key. In-process, so this module
runs on SQLite and on PostgreSQL alike.
"""

from __future__ import annotations

import pytest

from hitl.core.models import Cron, Thread
from hitl.core.resources.crons import CronTerms, cron_create
from tests.conftest import ApiClient

LOOKUP_KEYS = ["a__in", "y__regex", "a__isnull", "a__contains", "a__0", "a.b", "a b", "__x"]


@pytest.fixture
def threads(requester):
    made = {
        "plain": Thread.objects.create(
            graph="approval", requester=requester, metadata={"y": "abc"}
        ),
        "literal": Thread.objects.create(
            graph="approval", requester=requester, metadata={"y__regex": "^a", "a b": 1}
        ),
        "nested": Thread.objects.create(
            graph="approval",
            requester=requester,
            metadata={"n": {"k": 1, "other": 2}, "tags": ["x", "y"], "z": None},
        ),
    }
    return made


def _found(api, path: str, metadata: dict) -> list[str]:
    response = api.post(path, {"metadata": metadata})
    assert response.status_code == 200, response.content[:500]
    return response.json()


def _thread_ids(api, metadata: dict) -> set[str]:
    return {t["thread_id"] for t in _found(api, "/langgraph/threads/search", metadata)}


def test_a_lookup_shaped_metadata_key_does_not_work_as_a_lookup(requester, threads):
    api = ApiClient(requester)
    assert _thread_ids(api, {"y__regex": "^a"}) == {str(threads["literal"].pk)}
    assert _thread_ids(api, {"y__regex": "abc"}) == set()
    assert _thread_ids(api, {"y__startswith": "a"}) == set()


@pytest.mark.parametrize("key", LOOKUP_KEYS)
def test_any_metadata_key_is_searched_literally_never_a_500(requester, threads, key):
    api = ApiClient(requester)
    for value in ([1, 2], True, None, "x", {"k": 1}):
        assert _thread_ids(api, {key: value}) == set()
        count = api.post("/langgraph/threads/count", {"metadata": {key: value}})
        assert (count.status_code, count.json()) == (200, 0)
    assert _thread_ids(api, {"a b": 1}) == {str(threads["literal"].pk)}


def test_metadata_filters_match_by_json_containment(requester, threads):
    api = ApiClient(requester)
    nested = {str(threads["nested"].pk)}
    assert _thread_ids(api, {"n": {"k": 1}}) == nested  # a part of an object
    assert _thread_ids(api, {"n": {"k": 2}}) == set()
    assert _thread_ids(api, {"tags": ["y"]}) == nested  # a part of a list
    assert _thread_ids(api, {"tags": ["q"]}) == set()
    assert _thread_ids(api, {"z": None}) == nested  # null matches a null, not a missing key
    assert _thread_ids(api, {"y": "abc"}) == {str(threads["plain"].pk)}
    assert _thread_ids(api, {"y": "ab"}) == set()


def test_cron_metadata_filters_match_literally(requester):
    api = ApiClient(requester)
    plain = cron_create(
        user=requester,
        assistant_id="approval",
        schedule="0 9 * * *",
        payload={},
        terms=CronTerms(metadata={"y": "abc", "n": {"k": 1, "j": 2}}),
    )
    literal = cron_create(
        user=requester,
        assistant_id="approval",
        schedule="0 9 * * *",
        payload={},
        terms=CronTerms(metadata={"y__regex": "^a"}),
    )
    assert Cron.objects.count() == 2

    def ids(metadata):
        return {c["cron_id"] for c in _found(api, "/langgraph/runs/crons/search", metadata)}

    assert ids({"y__regex": "^a"}) == {str(literal.pk)}
    assert ids({"n": {"k": 1}}) == {str(plain.pk)}
    for key in LOOKUP_KEYS:
        assert ids({key: [1]}) == set()
        count = api.post("/langgraph/runs/crons/count", {"metadata": {key: None}})
        assert (count.status_code, count.json()) == (200, 0)
