"""A stream whose connection drops when it has had only its `metadata` part (the run
streamed nothing yet) comes back to the run's Location with that part's id as its
Last-Event-ID, and gets every part of the run once, after the run ended while the web
was down, and no second metadata (langgraph_sdk reconnects without Last-Event-ID when
no part had an id: the server could only send metadata again and what is live)."""

from __future__ import annotations

import pytest

from hitl.core.models import Run
from tests.api.conftest import StreamsRead, sdk_client
from tests.api.relay_graphs import RELAY_TICKS
from tests.conftest import wait_for
from tests.restartable import relay, relay_stack  # noqa: F401

pytestmark = pytest.mark.postgres

# No `values`: its first chunk (the input) would come before the gate.
MODES = ["custom", "updates"]


# The SDK warns when it reconnects with no id to give: here it must have one.
@pytest.mark.filterwarnings("error:Reconnecting without a Last-Event-ID")
def test_streams_dropped_after_only_their_metadata_get_every_part_once_after_the_run_ended(
    relay,  # noqa: F811
    reviewer,
    tmp_path,
):
    sdk = sdk_client(relay.base_url, reviewer)
    first, second = sdk.threads.create()["thread_id"], sdk.threads.create()["thread_id"]
    folders = {first: tmp_path / "a", second: tmp_path / "b"}
    for folder in folders.values():
        folder.mkdir()
    streams = StreamsRead()
    parts, errors, consume = streams.parts, streams.errors, streams.consume

    def start(thread_id: str):
        return lambda: sdk.runs.stream(
            thread_id, "gated", input={"dir": str(folders[thread_id])}, stream_mode=MODES
        )

    threads = [consume("runs.stream A", start(first)), consume("runs.stream B", start(second))]
    wait_for(
        lambda: parts["runs.stream B"] and all((f / "at-a").exists() for f in folders.values()),
        60,
        0.02,
        "both runs to wait at their gate",
    )
    run_id = parts["runs.stream B"][0].data["run_id"]
    threads += [
        consume(
            "runs.join_stream",
            lambda: sdk.runs.join_stream(second, run_id, stream_mode=MODES),
        ),
        consume("threads.join_stream", lambda: sdk.threads.join_stream(second, stream_mode=MODES)),
    ]
    wait_for(lambda: all(parts.values()), 60, 0.02, "every stream's metadata")
    assert {name: [p.event for p in got] for name, got in parts.items()} == {
        name: ["metadata"] for name in parts
    }
    relay.kill_web()  # each stream has had its metadata, and nothing else
    for folder in folders.values():
        (folder / "open-a").touch()
    ours = Run.objects.filter(thread_id__in=[first, second])
    wait_for(
        lambda: set(ours.values_list("status", flat=True)) == {"success"},
        60,
        0.05,
        "both runs to end while the web is down",
    )
    relay.start_web()
    for t in threads:
        t.join(90)
    assert not errors, errors
    for name, got in parts.items():
        events = [p.event for p in got]
        assert events.count("metadata") == 1, (name, events)
        ticks = [p.data["tick"] for p in got if p.event == "custom"]
        assert ticks == list(range(2 * RELAY_TICKS)), (name, events)
        updates = [list(p.data) for p in got if p.event == "updates"]
        assert updates == [["late"], ["after"]], (name, events)
