"""Where langgraph_sdk meets a LangGraph Server answer HITL used to give differently:
`if_exists="do_nothing"` on a default assistant's id returns it, a thread stream mode
HITL does not serve and a graph name where a cron search wants an assistant id are a
422 whose body says why."""

from __future__ import annotations

import httpx
import pytest

from hitl.core.models import Assistant
from hitl.core.resources.assistants import default_assistant_id
from tests.api.conftest import sdk_client

pytestmark = pytest.mark.postgres


def _refused(call) -> httpx.Response:
    with pytest.raises(httpx.HTTPStatusError) as caught:
        call()
    return caught.value.response


def test_do_nothing_on_a_default_assistants_id_returns_that_assistant(live, requester):
    client = sdk_client(live.base_url, requester)
    default_id = default_assistant_id("approval")
    found = client.assistants.create(
        "approval", assistant_id=default_id, if_exists="do_nothing", name="ignored"
    )
    assert (found["assistant_id"], found["graph_id"]) == (default_id, "approval")
    assert not Assistant.objects.exists()
    # Without do_nothing it is still a conflict, as LangGraph Server answers.
    response = _refused(lambda: client.assistants.create("approval", assistant_id=default_id))
    assert response.status_code == 409


@pytest.mark.parametrize("mode", ["lifecycle", "state_update"])
def test_a_thread_stream_mode_hitl_does_not_serve_is_a_422_that_says_why(live, requester, mode):
    client = sdk_client(live.base_url, requester)
    thread = client.threads.create()
    client.runs.create(thread["thread_id"], "approval", input={"request": "r"})

    def join():
        for _ in client.threads.join_stream(thread["thread_id"], stream_mode=mode):
            pass

    with pytest.raises(httpx.HTTPStatusError) as caught:
        join()
    assert caught.value.response.status_code == 422
    # The SDK's error carries the server's reason.
    assert mode in str(caught.value) and "run_modes" in str(caught.value)


def test_a_cron_search_by_graph_name_is_a_422_that_says_why(live, requester):
    client = sdk_client(live.base_url, requester)
    client.crons.create("approval", schedule="0 9 * * *", input={"request": "r"})
    for call in (
        lambda: client.crons.search(assistant_id="approval"),
        lambda: client.crons.count(assistant_id="approval"),
    ):
        response = _refused(call)
        assert response.status_code == 422
        assert "assistant_id" in response.text and "approval" in response.text
    assert len(client.crons.search(assistant_id=default_assistant_id("approval"))) == 1
