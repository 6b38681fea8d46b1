"""langgraph_sdk's joins across a daphne restart: `runs.join_stream(..., last_event_id=...)`
sent after daphne was killed mid-run and started again gets every part from where it
asks (those made while daphne was down from the event log, then the live rest), and a
`runs.join` in flight when daphne dies reconnects and returns the final values."""

from __future__ import annotations

import json
import threading
import uuid
from functools import partial
from typing import Any

import httpx
import pytest

from hitl.core.models import Run
from tests.api.conftest import sdk_client
from tests.api.relay_graphs import RELAY_TICKS
from tests.conftest import wait_for
from tests.restartable import relay, relay_stack  # noqa: F401

pytestmark = pytest.mark.postgres

MODES = ["values", "updates", "custom"]
LEGS = ["first", "second", "third"]


def _part(p) -> dict[str, Any]:
    return {"event": p.event, "id": p.id or None, "data": p.data}


def _whole_run(sdk, thread_id: str, run_id: str) -> list[dict[str, Any]]:
    return [
        _part(p)
        for p in sdk.runs.join_stream(thread_id, run_id, stream_mode=MODES, last_event_id="-1")
    ]


def _through_restart(relay, folder) -> None:  # noqa: F811
    """Kill daphne at gate a, let the second leg run with no web process up, start
    daphne again once the run waits at gate b."""
    wait_for(lambda: (folder / "at-a").exists(), 60, 0.02, "the run to reach gate a")
    relay.kill_web()
    (folder / "open-a").touch()
    wait_for(lambda: (folder / "at-b").exists(), 60, 0.02, "the run to reach gate b")
    relay.start_web()


def test_join_stream_with_last_event_id_after_a_restart_gets_every_later_part(
    relay,  # noqa: F811
    reviewer,
    tmp_path,
):
    sdk = sdk_client(relay.base_url, reviewer)
    thread_id = sdk.threads.create()["thread_id"]
    run = sdk.runs.create(thread_id, "relay", input={"dir": str(tmp_path)}, stream_mode=MODES)
    seen = []
    for part in sdk.runs.join_stream(thread_id, run["run_id"], last_event_id="-1"):
        seen.append(_part(part))
        if part.event == "custom" and part.data["tick"] == 1:
            break  # the client goes away mid-leg, holding this part's id
    _through_restart(relay, tmp_path)
    got, errors = [], []

    def join() -> None:
        try:
            for part in sdk.runs.join_stream(
                thread_id, run["run_id"], last_event_id=seen[-1]["id"]
            ):
                got.append(_part(part))
        except BaseException as exc:  # reported below
            errors.append(exc)

    joiner = threading.Thread(target=join)
    joiner.start()
    ticks = lambda: [p["data"]["tick"] for p in got if p["event"] == "custom"]  # noqa: E731
    wait_for(lambda: 2 * RELAY_TICKS - 1 in ticks(), 60, 0.02, "the join to replay leg two")
    (tmp_path / "open-b").touch()  # the third leg comes live
    joiner.join(60)
    assert not errors, errors
    assert ticks() == list(range(2, 3 * RELAY_TICKS))  # from the part after the one named
    assert all(p["event"] != "metadata" for p in got)
    whole = _whole_run(sdk, thread_id, run["run_id"])
    assert seen + got == whole
    assert whole[-1]["event"] == "values" and whole[-1]["data"]["legs"] == LEGS


def _in_flight(sdk, call, path_end: str):
    """Start `call` in a thread once its response headers may come; its result box, the
    thread, and an event set when the headers came."""
    answered = threading.Event()
    sdk.http.client.event_hooks["response"].append(
        lambda response: answered.set() if response.url.path.endswith(path_end) else None
    )
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["values"] = call()
        except BaseException as exc:  # reported by the test
            result["error"] = exc

    caller = threading.Thread(target=run)
    caller.start()
    return result, caller, answered


@pytest.mark.parametrize("verb", ["join", "wait"])
def test_a_join_or_wait_in_flight_across_a_restart_returns_the_final_values(
    relay,  # noqa: F811
    reviewer,
    tmp_path,
    verb,
):
    sdk = sdk_client(relay.base_url, reviewer)
    thread_id = sdk.threads.create()["thread_id"]
    if verb == "join":
        run = sdk.runs.create(thread_id, "relay", input={"dir": str(tmp_path)})
        wait_for(lambda: (tmp_path / "at-a").exists(), 60, 0.02, "the run to reach gate a")
        call = partial(sdk.runs.join, thread_id, run["run_id"])
    else:
        call = partial(sdk.runs.wait, thread_id, "relay", input={"dir": str(tmp_path)})
    result, caller, answered = _in_flight(sdk, call, f"/{verb}")
    # The headers came (naming the run's /join to come back to); the answer is to come.
    wait_for(answered.is_set, 30, 0.02, "the response headers")
    _through_restart(relay, tmp_path)
    (tmp_path / "open-b").touch()
    caller.join(60)
    assert "error" not in result, result
    assert result["values"]["legs"] == LEGS
    (run,) = Run.objects.filter(thread_id=thread_id)
    assert run.status == Run.Status.SUCCESS
    # The answer came from the restarted server, through the run's /join.
    assert f"/runs/{run.pk}/join" in relay.web_log()


@pytest.mark.parametrize(
    ("found", "error"),
    [(Run.Status.RUNNING, "TimeoutError"), (None, "NotFound")],
)
def test_a_wait_that_ends_without_an_answer_says_why_in_its_body(found, error, settings):
    """Past the wait limit, or with the run deleted meanwhile: the headers went out as a
    200, so the body carries the error, as LangGraph Server's does."""
    from asgiref.sync import async_to_sync
    from django.test import RequestFactory

    from hitl.api.langgraph.run_http import waiting_response

    settings.HITL_API_WAIT_SECONDS = 7
    run = Run(pk=uuid.uuid4(), thread_id=uuid.uuid4(), status=Run.Status.RUNNING)

    async def finished():
        return None if found is None else run

    async def answer(_):
        raise AssertionError("a run that did not end has no answer")

    response = waiting_response(RequestFactory().get("/"), run, finished, answer)

    async def read() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    body = async_to_sync(read)()
    assert response["Location"] == f"/threads/{run.thread_id}/runs/{run.pk}/join"
    assert body.startswith(b"\n")
    assert json.loads(body)["__error__"]["error"] == error
    if found:
        assert "still running after 7s" in json.loads(body)["__error__"]["message"]


def test_a_join_of_an_ended_run_answers_at_once_with_its_values(relay, reviewer, tmp_path):  # noqa: F811
    sdk = sdk_client(relay.base_url, reviewer)
    thread_id = sdk.threads.create()["thread_id"]
    for gate in ("a", "b"):
        (tmp_path / f"open-{gate}").touch()
    values = sdk.runs.wait(thread_id, "relay", input={"dir": str(tmp_path)})
    (run,) = sdk.runs.list(thread_id)
    url = f"{relay.base_url}/langgraph/threads/{thread_id}/runs/{run['run_id']}/join"
    joined = httpx.get(url, headers=sdk.http.client.headers, timeout=30)
    assert joined.status_code == 200 and joined.json() == values
    assert values["legs"] == LEGS


# langgraph_sdk's request_reconnect tries a join's Location 5 times, 1, 2, 4, 5 and 5 s
# apart (plus jitter): a web that comes back after the 4th try failed is back within the
# SDK's window (a restart of some 12 to 17 s), as a deploy's is.
FAILED_TRIES = 4


def test_a_join_and_a_wait_survive_a_restart_as_long_as_the_sdks_retry_window(
    relay,  # noqa: F811
    reviewer,
    tmp_path,
):
    """Both verbs in flight across one restart (each restart waits out the SDK's backoff)."""
    down = threading.Event()
    calls = {}
    for verb in ("join", "wait"):
        folder = tmp_path / verb
        folder.mkdir()
        sdk = sdk_client(relay.base_url, reviewer)
        thread_id = sdk.threads.create()["thread_id"]
        run_id = ""
        if verb == "join":
            run_id = sdk.runs.create(thread_id, "relay", input={"dir": str(folder)})["run_id"]
            wait_for(lambda f=folder: (f / "at-a").exists(), 60, 0.02, "the run to reach gate a")
            call = partial(sdk.runs.join, thread_id, run_id)
        else:
            call = partial(sdk.runs.wait, thread_id, "relay", input={"dir": str(folder)})
        tries: list[str] = []
        sdk.http.client.event_hooks["request"].append(
            lambda request, tries=tries: (
                tries.append(request.url.path)
                if down.is_set() and request.url.path.endswith("/join")
                else None
            )
        )
        result, caller, answered = _in_flight(sdk, call, f"/{verb}")
        wait_for(answered.is_set, 30, 0.02, "the response headers")
        wait_for(lambda f=folder: (f / "at-a").exists(), 60, 0.02, "the run to reach gate a")
        calls[verb] = (folder, run_id, tries, result, caller)
    relay.kill_web()
    down.set()
    for folder, *_ in calls.values():
        (folder / "open-a").touch()
        (folder / "open-b").touch()  # the run ends while the web is down
    # The web stays down until each client has tried to come back FAILED_TRIES times.
    for verb, (_, _, tries, _, _) in calls.items():
        wait_for(lambda t=tries: len(t) >= FAILED_TRIES, 60, 0.05, f"the {verb} to retry")
    relay.start_web()
    for verb, (_, run_id, _, result, caller) in calls.items():
        caller.join(60)
        assert "error" not in result, (verb, result)
        assert result["values"]["legs"] == LEGS
        assert f"/runs/{run_id}" in relay.web_log()
