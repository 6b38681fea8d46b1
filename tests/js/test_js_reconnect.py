"""The JS SDK's own reconnect across a daphne restart: npm @langchain/langgraph-sdk's
Client streams a run, daphne is killed mid-run and started again on the same port, and
the SDK's reconnect (to the `Location`, with `Last-Event-ID`) gets every remaining part:
those made while daphne was down, from the event log, then the live rest. Also
`runs.joinStream(thread, run, {lastEventId})` sent after a restart."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from hitl.core.models import Run
from tests.api.conftest import sdk_client, token_for
from tests.api.relay_graphs import RELAY_TICKS
from tests.conftest import ROOT, wait_for
from tests.restartable import relay, relay_stack  # noqa: F401

pytestmark = pytest.mark.postgres

SCRIPT = Path(__file__).with_name("reconnect.cjs")
MODES = ["values", "updates", "custom"]


@pytest.fixture(scope="module")
def node_path() -> str:
    """var/node/js's node_modules, installed by scripts/ensure-js-clients."""
    subprocess.run([str(ROOT / "scripts" / "ensure-js-clients")], check=True, timeout=300)
    return str(ROOT / "var" / "node" / "js" / "node_modules")


class NodeClient:
    """The reconnect script in a node process; its JSON lines, read as they come."""

    def __init__(self, node_path: str, *args: str):
        env = {**os.environ, "NODE_PATH": node_path}
        self.proc = subprocess.Popen(
            ["node", str(SCRIPT), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw.append(line)
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def parts(self) -> list[dict[str, Any]]:
        return [line for line in list(self.lines) if "event" in line]

    def ticks(self) -> list[int]:
        return [p["data"]["tick"] for p in self.parts() if p["event"] == "custom"]

    def finish(self, timeout: float = 90) -> list[dict[str, Any]]:
        self.proc.wait(timeout)
        self._reader.join(10)
        assert {"done": True} in self.lines, "".join(self.raw)[-3000:]
        return self.parts()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _whole_run(sdk, thread_id: str, run_id: str) -> list[dict[str, Any]]:
    """The run's parts as a join from its start gets them after it ended."""
    return [
        {"event": p.event, "id": p.id or None, "data": p.data}
        for p in sdk.runs.join_stream(thread_id, run_id, stream_mode=MODES, last_event_id="-1")
    ]


def _assert_whole(got: list[dict[str, Any]], whole: list[dict[str, Any]]) -> None:
    ticks = [p["data"]["tick"] for p in got if p["event"] == "custom"]
    assert ticks == list(range(3 * RELAY_TICKS)), ticks  # none missing, none twice
    assert got == whole  # every part, its id and data, in the run's order
    assert got[-1]["event"] == "values" and got[-1]["data"]["legs"] == ["first", "second", "third"]


@pytest.mark.parametrize("ended_while_down", [False, True], ids=["live-tail", "ended-while-down"])
def test_the_js_sdks_own_reconnect_gets_every_part_across_a_daphne_restart(
    relay,  # noqa: F811
    reviewer,
    node_path,
    tmp_path,
    ended_while_down,
):
    sdk = sdk_client(relay.base_url, reviewer)
    thread_id = sdk.threads.create()["thread_id"]
    payload = {
        "input": {"dir": str(tmp_path)},
        "streamMode": MODES,
        "streamResumable": True,
        "onDisconnect": "continue",
    }
    js = NodeClient(
        node_path,
        "stream",
        f"{relay.base_url}/langgraph",
        token_for(reviewer),
        thread_id,
        "relay",
        json.dumps(payload),
    )
    try:
        wait_for(lambda: (tmp_path / "at-a").exists(), 60, 0.02, "the run to reach gate a")
        wait_for(lambda: len(js.ticks()) == RELAY_TICKS, 30, 0.02, "the first leg's ticks")
        relay.kill_web()
        # The second leg runs while no web process is up: its parts are only in the log.
        (tmp_path / "open-a").touch()
        wait_for(lambda: (tmp_path / "at-b").exists(), 60, 0.02, "the run to reach gate b")
        if ended_while_down:  # the whole rest of the run is only in the log
            (tmp_path / "open-b").touch()
            wait_for(lambda: Run.objects.get(thread_id=thread_id).status == "success", 60)
        relay.start_web()
        wait_for(lambda: len(js.ticks()) >= 2 * RELAY_TICKS, 60, 0.05, "the SDK to reconnect")
        (tmp_path / "open-b").touch()  # the third leg comes live to the new daphne
        got = js.finish()
    finally:
        js.stop()
    (run,) = Run.objects.filter(thread_id=thread_id)
    assert run.status == Run.Status.SUCCESS
    # Metadata carries where the stream began (a new thread's log holds nothing before
    # it), so a client that had only metadata resumes from there, not from the live tail.
    assert got[0] == {
        "event": "metadata",
        "id": "0-0#*",
        "data": {"run_id": str(run.pk), "attempt": 1},
    }
    _assert_whole(got, _whole_run(sdk, thread_id, str(run.pk)))
    # The tail came through the restarted server, by the SDK's GET of the Location.
    assert f"/langgraph/threads/{thread_id}/runs/{run.pk}/stream" in relay.web_log()


def test_the_js_sdks_join_stream_with_last_event_id_after_a_restart(
    relay,  # noqa: F811
    reviewer,
    node_path,
    tmp_path,
):
    sdk = sdk_client(relay.base_url, reviewer)
    thread_id = sdk.threads.create()["thread_id"]
    run = sdk.runs.create(thread_id, "relay", input={"dir": str(tmp_path)}, stream_mode=MODES)
    seen = []
    for part in sdk.runs.join_stream(thread_id, run["run_id"], last_event_id="-1"):
        seen.append({"event": part.event, "id": part.id or None, "data": part.data})
        if part.event == "custom" and part.data["tick"] == RELAY_TICKS - 1:
            break  # the client goes away here, holding this part's id
    last_id = seen[-1]["id"]
    wait_for(lambda: (tmp_path / "at-a").exists(), 60, 0.02, "the run to reach gate a")
    relay.kill_web()
    (tmp_path / "open-a").touch()
    wait_for(lambda: (tmp_path / "at-b").exists(), 60, 0.02, "the run to reach gate b")
    relay.start_web()
    js = NodeClient(
        node_path,
        "join",
        f"{relay.base_url}/langgraph",
        token_for(reviewer),
        thread_id,
        run["run_id"],
        last_id,
    )
    try:
        wait_for(lambda: len(js.ticks()) == RELAY_TICKS, 60, 0.05, "the join to replay leg two")
        (tmp_path / "open-b").touch()
        got = js.finish()
    finally:
        js.stop()
    # From the part after the one it named: no metadata again, nothing it had, nothing missed.
    _assert_whole(seen + got, _whole_run(sdk, thread_id, run["run_id"]))
