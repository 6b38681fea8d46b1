"""A review cycle's Redis traffic on the worker's side stays small, and batching events
does not hold them back.

Counted with MONITOR on this test's Redis db while the worker's part of the cycle runs
in this process (the run to its pause, then its resume). The caps are today's counts;
lower them when a change removes commands. bench/peers.py measures the whole cycle.
"""

from __future__ import annotations

import copy
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.db import connection

from hitl.api.langgraph import services as lg_services
from hitl.compat import channels_redis
from hitl.core.live import batches, eventlog
from hitl.core.live.publisher import publisher
from hitl.core.worker.execute import execute_run
from tests.conftest import wait_for
from tests.graphs import register_in_process

pytestmark = pytest.mark.postgres  # the Redis deployment: the log and layer on one Redis


# What a new connection sends (and a script's first load): not the cycle's traffic.
CONNECTING = frozenset(("SELECT", "CLIENT", "HELLO", "SUBSCRIBE", "SCRIPT", "PING"))


FLUSH_GROUP = "hitl.flush"  # what publisher.flush() sends through the layer


class Monitor:
    """The commands clients send to this test's Redis db (scripts' own calls left out)."""

    def __init__(self) -> None:
        self.client = redis.Redis.from_url(settings.REDIS_URL)
        self.db = self.client.connection_pool.connection_kwargs.get("db", 0)
        self.commands: list[list[str]] = []
        self._end = f"monitor-end-{uuid.uuid4().hex}"
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)

    def _listen(self) -> None:
        with self.client.monitor() as monitor:
            self._ready.set()
            for seen in monitor.listen():
                if seen.get("client_type") == "lua" or int(seen.get("db", -1)) != self.db:
                    continue
                words = seen["command"].split(" ")
                if self._end in seen["command"]:
                    return
                if words[0].upper() not in CONNECTING:
                    self.commands.append(words)

    def __enter__(self) -> Monitor:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        self.client.echo(self._end)
        self._thread.join(10)
        assert not self._thread.is_alive()

    def named(self, name: str) -> list[list[str]]:
        return [words for words in self.commands if words[0].upper() == name]

    def cycle(self) -> list[list[str]]:
        """The commands, less the test's own flush of the publisher."""
        return [
            [words[0].upper(), *words[1:]]
            for words in self.commands
            if FLUSH_GROUP not in " ".join(words)
        ]

    def appends(self) -> list[list[str]]:
        """The event log's appends (one script call each)."""
        return [words for words in self.named("EVALSHA") if "hitl:eventlog:" in " ".join(words)]


@pytest.fixture
def nobody_listens(settings):
    """Groups of this test's own (a layer prefix): a socket an earlier test left behind
    stays a group's member until it expires, and would be counted here as a listener."""
    layers = copy.deepcopy(settings.CHANNEL_LAYERS)
    layers["default"]["CONFIG"]["prefix"] = f"asgi-{uuid.uuid4().hex[:8]}"
    settings.CHANNEL_LAYERS = layers  # channels builds its layers anew on the change
    # A script's first call after Redis started is refused (NOSCRIPT) and sent again: a
    # running deployment has them cached, as they are here.
    client = redis.Redis.from_url(settings.REDIS_URL)
    for script in (eventlog._APPEND, channels_redis._MEMBERS, channels_redis._DELIVER):
        client.script_load(script)


@pytest.fixture
def worker_side(manual_runs):
    """Execute a run as a worker does, then hand over what it published to the layer."""

    def execute(run) -> str:
        outcome = manual_runs(run)
        publisher.flush()
        return outcome

    return execute


def monitored_cycle(worker_side, requester, reviewer, **options):
    """Start a run to its pause and resume it with accept, each executed as a worker
    does: the first run, its Monitor and the resume's."""
    run = lg_services.run_create(user=requester, assistant_id="approval", input={}, **options)
    publisher.flush()  # the start's own announcement (the web's part) goes first
    with Monitor() as first:
        assert worker_side(run) == "interrupted"
    resume = lg_services.run_create(
        user=reviewer,
        assistant_id="approval",
        thread_id=run.thread_id,
        command={"resume": {"type": "accept"}},
        **options,
    )
    publisher.flush()
    with Monitor() as second:
        assert worker_side(resume) == "success"
    return run, first, second


def test_a_cycle_logs_each_runs_stream_in_one_append(
    nobody_listens, worker_side, transactional_db, requester, reviewer, monkeypatch
):
    assert eventlog.enabled(), "this test needs the Redis deployment"
    # A run that ends before the batch's wait logs its stream in one append. The wait is
    # made longer than any run here, so a busy machine's slow run (over 50 ms) cannot
    # split it: the count below is the batching's, not the machine's speed.
    monkeypatch.setattr(batches, "FLUSH_SECONDS", 60.0)
    # As a /langgraph client streams it (runs.stream, runs.create): its events are
    # logged from the start.
    stream = lg_services.RunRequest(stream_modes=["values"])
    run, first, second = monitored_cycle(worker_side, requester, reviewer, request=stream)

    logged = [event for _, event in eventlog.read_from(run.thread_id, "0-0")]
    kinds = [event["type"] for event in logged]
    # Every event is logged, in order: each run's start, its stream, its end.
    assert kinds.count("RUN_STARTED") == 2 and kinds.count("RUN_FINISHED") == 2
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    # The client's `values` (and the pause's values chunk), nothing only the thread
    # stream reads: nobody listens to it.
    assert kinds.count("STATE_SNAPSHOT") >= 3
    raw = [event["event"]["mode"] for event in logged if event["type"] == "RAW"]
    assert raw == ["values"] and set(kinds) == {
        "RUN_STARTED",
        "STATE_SNAPSHOT",
        "RAW",
        "RUN_FINISHED",
    }
    for monitor, cap in ((first, 10), (second, 5)):
        sent = monitor.cycle()
        # RUN_STARTED, the whole stream, RUN_FINISHED: one append each (was one a chunk).
        assert len(monitor.appends()) == 3, sent
        # Nobody listens: nothing is sent live, and each announcement of the run's end
        # (its status; the thread, inbox and user groups; at a pause the new interrupt)
        # costs at most one script that reads its groups' members, fewer when they go
        # out together (channels_redis spends two round trips or four on each group,
        # MULTI included).
        assert len([w for w in sent if w[0] == "EVALSHA"]) <= 3 + 3, sent
        # Whether anyone listens to the thread stream (else only the client's modes are
        # built and logged) is asked with the run's start: no round trip of its own.
        assert {w[0] for w in sent} <= {"EVALSHA", "ZCOUNT", "GET"}, sent
        # At the pause also the inbox check before its row is rendered, pipelined (two
        # ZCOUNTs), and the config cache (two GETs). 17 and 14 commands before batching.
        assert len(sent) <= cap, sent


def test_a_waits_cycle_logs_nothing_while_nobody_listens(
    nobody_listens, worker_side, transactional_db, requester, reviewer
):
    assert eventlog.enabled(), "this test needs the Redis deployment"
    # As runs.wait starts it: the answer is the run's end, so the run has no modes of its
    # own, and with nobody listening nothing of its stream is built or logged.
    run, first, second = monitored_cycle(worker_side, requester, reviewer)

    assert eventlog.read_from(run.thread_id, "0-0") == []
    for monitor, cap in ((first, 9), (second, 5)):
        sent = monitor.cycle()
        assert monitor.appends() == [], sent
        # Whether anyone listens, at the start and at the end (a pipelined ZCOUNT and
        # EXISTS each), and the announcements of the end as above (at the pause also
        # the inbox check and the config cache).
        assert len([w for w in sent if w[0] == "EXISTS"]) == 2, sent
        assert len([w for w in sent if w[0] == "EVALSHA"]) <= 3, sent
        assert len(sent) <= cap, sent


@pytest.fixture
def slow_graph(monkeypatch, tmp_path):
    register_in_process(monkeypatch)
    return tmp_path


def test_a_quiet_runs_events_are_logged_while_it_still_runs(
    manual_runs, transactional_db, requester, slow_graph
):
    # Nobody listens live, so events wait for a batch, but not for the run's end: a
    # client that joins or reconnects mid-run finds what the run did so far.
    run = lg_services.run_create(
        user=requester,
        assistant_id="slow_side_effect",
        input={"dir": str(slow_graph)},
        request=lg_services.RunRequest(stream_modes=["values", "updates"]),
    )
    outcome: list[str] = []

    def execute() -> None:
        try:
            outcome.append(execute_run(str(run.pk), worker="w")[0])
        finally:
            connection.close()

    worker = threading.Thread(target=execute)
    worker.start()
    try:
        wait_for(lambda: list(Path(slow_graph).glob("slow-*")), what="the slow node to start")

        # The client's modes as the thread stream carries them: the input's values, then
        # the first step's update, and nothing only the thread stream reads (nobody
        # listens to it).
        def logged() -> list[tuple[str, Any]]:
            return [
                (event["type"], event.get("event", {}).get("data"))
                for _, event in eventlog.read_from(run.thread_id, "0-0")
            ]

        first_step = [
            ("RUN_STARTED", None),
            ("STATE_SNAPSHOT", None),
            ("RAW", {"side_effect": None}),
        ]
        wait_for(lambda: logged() == first_step, what="the first step in the log")
    finally:
        (Path(slow_graph) / "release").touch()
        worker.join(60)
    assert outcome == ["interrupted"]
    assert [kind for kind in _kinds(run.thread_id) if kind.startswith("RUN_")] == [
        "RUN_STARTED",
        "RUN_FINISHED",
    ]


def _kinds(thread_id) -> list[str]:
    return [event["type"] for _, event in eventlog.read_from(thread_id, "0-0")]


@pytest.mark.parametrize("kept_by", ["a page about to open", "a resumable stream"])
def test_a_run_whose_thread_stream_is_kept_streams_it_whole(
    kept_by, nobody_listens, worker_side, transactional_db, requester
):
    # Nobody is in the thread's group, but its stream is kept: the run's start (which
    # asks in its own append) finds that, and the run builds what the thread stream
    # carries, its nodes' starts too, not only its client's `values`.
    thread = lg_services.thread_create(user=requester)
    if kept_by == "a page about to open":
        assert eventlog.expect_listener(thread.pk, 60)
    else:
        eventlog.mark_resumable(thread.pk, uuid.uuid4(), ["values"])
    run = lg_services.run_create(
        user=requester,
        assistant_id="approval",
        thread=thread,
        input={},
        request=lg_services.RunRequest(stream_modes=["values"]),
    )
    assert worker_side(run) == "interrupted"
    kinds = _kinds(thread.pk)
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    assert "CUSTOM" in kinds, kinds  # hitl.node_started: for the thread stream alone
