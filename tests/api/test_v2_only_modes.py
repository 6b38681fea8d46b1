"""`tools` and `lifecycle` stream modes: LangGraph Server (langgraph-api 0.16,
models/run.py) refuses them on its runs endpoints with a 422 naming them, as they
exist only on its protocol v2 event-streaming endpoints. So does HITL, with nothing
started."""

from __future__ import annotations

import pytest
from langgraph_sdk.errors import APIStatusError

from hitl.core.models import Run, Thread
from tests.api.conftest import sdk_client

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("modes", [["tools"], ["lifecycle"], ["values", "tools", "lifecycle"]])
def test_v2_only_modes_are_a_422_that_names_them(parity, requester, modes):
    client = sdk_client(parity.base_url, requester)
    thread = client.threads.create()
    with pytest.raises(APIStatusError) as caught:
        list(client.runs.stream(thread["thread_id"], "echo_config", input={}, stream_mode=modes))
    assert caught.value.response.status_code == 422
    detail = caught.value.response.json()["detail"]
    assert all(repr(m) in detail for m in modes if m in ("tools", "lifecycle"))
    assert "v2 event streaming" in detail
    with pytest.raises(APIStatusError) as caught:
        client.runs.create(None, "echo_config", input={}, stream_mode="tools")
    assert caught.value.response.status_code == 422
    assert not Run.objects.exists() and Thread.objects.count() == 1
