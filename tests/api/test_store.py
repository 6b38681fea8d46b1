"""LangGraph's store: graphs get it (the `store` argument, `get_store()`) on the worker,
and langgraph_sdk's `client.store` reads and writes the same store."""

from __future__ import annotations

import httpx
import pytest
from django.contrib.auth.models import Permission

from tests.api.conftest import sdk_client
from tests.conftest import store_clear

pytestmark = pytest.mark.postgres


def _status(call) -> int:
    with pytest.raises(httpx.HTTPStatusError) as caught:
        call()
    return caught.value.response.status_code


@pytest.fixture(autouse=True)
def _empty_store(parity):
    store_clear()


@pytest.fixture
def keeper(requester):
    requester.user_permissions.add(Permission.objects.get(codename="use_store"))
    return requester


def test_graphs_and_the_sdk_share_the_store(parity, keeper):
    client = sdk_client(parity.base_url, keeper)
    first = client.runs.wait(None, "memory", input={"user": "quinn"})
    second = client.runs.wait(None, "memory", input={"user": "quinn"})
    assert (first["count"], second["count"]) == (1, 2)
    assert second["via_get_store"] == 2  # get_store() sees the node's own write

    item = client.store.get_item(["visits", "quinn"], "count")
    assert (item["value"], item["namespace"], item["key"]) == (
        {"n": 2},
        ["visits", "quinn"],
        "count",
    )
    client.store.put_item(["visits", "quinn"], "count", {"n": 40})
    assert client.runs.wait(None, "memory", input={"user": "quinn"})["count"] == 41

    client.store.put_item(["notes", "quinn"], "a", {"topic": "q3", "n": 1})
    client.store.put_item(["notes", "quinn"], "b", {"topic": "q4", "n": 2})
    found = client.store.search_items(["notes"], filter={"topic": "q4"})["items"]
    assert [i["key"] for i in found] == ["b"]
    assert len(client.store.search_items(["notes", "quinn"], limit=1)["items"]) == 1
    namespaces = client.store.list_namespaces()["namespaces"]
    assert ["notes", "quinn"] in namespaces and ["visits", "quinn"] in namespaces
    assert client.store.list_namespaces(prefix=["notes"])["namespaces"] == [["notes", "quinn"]]
    assert client.store.list_namespaces(max_depth=1)["namespaces"] == [["notes"], ["visits"]]

    client.store.delete_item(["notes", "quinn"], "a")
    assert client.store.get_item(["notes", "quinn"], "a") is None


def test_the_store_api_needs_the_permission(parity, requester):
    client = sdk_client(parity.base_url, requester)
    assert _status(lambda: client.store.get_item(["visits", "quinn"], "count")) == 403
    assert _status(lambda: client.store.put_item(["x"], "k", {"v": 1})) == 403
    assert _status(lambda: client.store.list_namespaces()) == 403


def test_unsupported_store_features_are_a_clear_400(parity, keeper):
    client = sdk_client(parity.base_url, keeper)
    assert _status(lambda: client.store.search_items(["notes"], query="about q3")) == 400
    assert _status(lambda: client.store.put_item(["n"], "k", {"v": 1}, index=["v"])) == 400
    assert _status(lambda: client.store.put_item(["n"], "k", {"v": 1}, ttl=5)) == 400
    # What the SDK itself refuses to send, sent anyway.
    raw = {"namespace": ["a.b"], "key": "k", "value": {"v": 1}}
    assert _status(lambda: client.http.put("/store/items", json=raw)) == 400
    assert _status(lambda: client.store.put_item([], "k", {"v": 1})) == 400
    assert client.store.search_items(["n"])["items"] == []
    # index=False is what LangGraph sends to skip indexing: accepted.
    client.store.put_item(["n"], "k", {"v": 1}, index=False)
    assert client.store.get_item(["n"], "k")["value"] == {"v": 1}
