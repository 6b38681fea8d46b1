"""Wait for runs and thread statuses without polling: listen on the thread's channel group.

The worker publishes `thread.event` (AG-UI events) and, after each committed status
change, `thread.changed` to listeners.thread_group(thread_id). A waiter subscribes
first and reads the database second, so a change between the two cannot be missed;
it re-reads the database on every relevant message and every RECHECK_SECONDS anyway,
so a message the channel layer dropped (capacity, expiry) only delays it.

A waiter holds no database connection while it waits: every read on the way to and
during a wait goes through `released`, which hands the request thread's pooled
connection back when the read returns. So a thousand open waits and streams cost a
web process no more than its pool (DB_POOL_MAX_SIZE), not a connection each.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import close_old_connections, connection

from hitl.compat import channels_redis
from hitl.core.db.retry import discard_dead_connections, suspect_connections
from hitl.core.errors import Unavailable, is_transient
from hitl.core.live import events, listeners
from hitl.core.live.publisher import is_broadcast, publisher
from hitl.core.models import Run, Thread

log = logging.getLogger(__name__)

# While the layer is heard, how long a waiter relies on messages before reading the
# database again: the re-read only covers a message the layer dropped, and every open
# wait pays it. At 5 s a wait on a model call of 5 s or more paid a read and its answer
# built anew (2-4 ms of the web's CPU per cycle, docs/benchmarks.md), and 1,000 open
# waits 200 reads a second.
RECHECK_SECONDS = 15.0
# After its last waiter leaves, the hub stays in a thread's group this long.
LINGER_SECONDS = 2.0
# While the channel layer is unreachable (Redis down), waiters poll the database this often.
POLL_SECONDS = 0.5
TERMINAL = frozenset(Run.TERMINAL)


def release_connection() -> None:
    """Give this thread's pooled database connection back to the pool.

    Not inside a transaction (it holds the connection on purpose), and only with a
    pool: SQLite's per-thread connection costs nothing to keep.
    """
    if (
        connection.connection is not None
        and not connection.in_atomic_block
        and getattr(connection, "pool", None) is not None
    ):
        connection.close()


def released(func: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """`func` as a coroutine on the request's thread that gives the connection back after.

    For every database read of a request that then waits (or reads again later): the
    connection returns to the pool in the same hop, so the wait holds none.
    """

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        finally:
            release_connection()

    functools.update_wrapper(call, func)
    return sync_to_async(call)


# Run ends whose ids a hub remembers, to pass over a second copy (the broadcast and a
# thread group both carry one); copies arrive moments apart.
SEEN_IDS = 512


class _Hub:
    """One channel-layer receiver per event loop, fanning messages out to waiters.

    Waiters never call receive() themselves: cancelling a channels_redis receive
    half-way can leave it stuck, so the hub's receive is never cancelled; it stops
    when a "hitl.hub.stop" message it sends itself arrives, once nobody waits.
    """

    STOP = "hitl.hub.stop"

    def __init__(self, layer) -> None:
        self.layer = layer
        self.channel = ""
        # Waiting queues by channel-layer group (a thread's full or status-only group).
        self.waiters: dict[str, set[asyncio.Queue]] = {}
        # The ids of the last SEEN_IDS run ends dispatched, oldest first.
        self.seen: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.stopping = False
        self.task: asyncio.Task | None = None
        self.ready = asyncio.Event()
        # False while the layer fails: waiters poll the database instead of waiting on it.
        self.healthy = True
        self._healing: asyncio.Task | None = None
        # Groups nobody here waits on any more, still joined for LINGER_SECONDS (their
        # discard is scheduled), and the discards under way.
        self.lingering: dict[str, asyncio.TimerHandle] = {}
        self.leaving: dict[str, asyncio.Task] = {}
        # On a single Redis, status groups are broadcast (publisher.is_broadcast): the hub
        # hears them all on one pub/sub connection and joins none. False while that
        # connection is down or not yet subscribed: waiters poll meanwhile.
        self.broadcasting = channels_redis.can_broadcast(layer)
        self.hearing = False
        self.broadcast_task: asyncio.Task | None = None
        self.pubsub: Any = None  # the broadcast channel's connection, while subscribed

    async def start(self) -> None:
        self.channel = await self.layer.new_channel()
        loop = asyncio.get_running_loop()
        self.task = loop.create_task(self._pump())
        if self.broadcasting:
            tried = asyncio.Event()
            self.broadcast_task = loop.create_task(self._hear_broadcasts(tried))
            await tried.wait()  # subscribed (or failed once: waiters poll until it is)
        self.ready.set()

    @property
    def listening(self) -> bool:
        """Whether waiters may rely on messages (else they poll the database)."""
        return self.healthy and (self.hearing or not self.broadcasting)

    def is_broadcast(self, group: str) -> bool:
        return self.broadcasting and is_broadcast(group)

    async def _hear_broadcasts(self, tried: asyncio.Event) -> None:
        """Hand every broadcast message to its waiters, subscribing again after a failure."""
        while True:
            pubsub = None
            try:
                self.pubsub = pubsub = await channels_redis.broadcasts(self.layer)
                self.hearing = True
                tried.set()
                while True:
                    self._dispatch_status(await channels_redis.next_broadcast(self.layer, pubsub))
            except Exception:  # e.g. Redis restarting: waiters poll the database meanwhile
                if self.hearing or not tried.is_set():
                    log.warning("broadcast channel failed; waiters poll until it is back")
                self.hearing = False
                tried.set()
            finally:
                self.pubsub = None
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.shield(pubsub.aclose())
            await asyncio.sleep(POLL_SECONDS)

    async def _pump(self) -> None:
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except Exception:  # e.g. Redis restarting: waiters poll the database meanwhile
                if self.healthy:
                    log.warning("channel layer receive failed; waiters poll until it is back")
                self.unhealthy()
                await asyncio.sleep(POLL_SECONDS)
                continue
            if message.get("type") == self.STOP:
                return
            self._dispatch(message)

    def _dispatch(self, message: dict[str, Any]) -> None:
        """A message of a group the hub joined."""
        thread_id = str(message.get("thread_id"))
        targets = set(self.waiters.get(listeners.thread_group(thread_id), ()))
        # A run's end is for status waiters too, whichever group it came by, once (a run's
        # start is not for them).
        if message.get("type") == "thread.changed" and is_run_end(message):
            if self.broadcasting:  # their copy comes by the broadcast, unless this is first
                self._dispatch_status(message)
            elif self._first(message):
                targets |= self.waiters.get(listeners.thread_status_group(thread_id), set())
            else:
                return  # the second copy, via the other thread group
        for queue in targets:
            queue.put_nowait(message)

    def _dispatch_status(self, message: dict[str, Any]) -> None:
        """A run's end for the thread's status waiters (a broadcast, or its other copy).
        Every run's end comes by the broadcast: only those waited for here are kept."""
        queues = self.waiters.get(listeners.thread_status_group(message.get("thread_id")))
        if queues and self._first(message):
            for queue in queues:
                queue.put_nowait(message)

    def _first(self, message: dict[str, Any]) -> bool:
        """Whether no copy of this message (by its id) came before."""
        eid = message.get("eid")
        if eid is None:
            return True
        if eid in self.seen:
            return False
        self.seen[eid] = None
        if len(self.seen) > SEEN_IDS:
            self.seen.popitem(last=False)
        return True

    def unhealthy(self) -> None:
        """Mark the layer as failing and rejoin every group once it answers again."""
        self.healthy = False
        # A restarted layer has forgotten them: the next waiter on one joins it anew.
        for handle in self.lingering.values():
            handle.cancel()
        self.lingering.clear()
        if self._healing is None or self._healing.done():
            self._healing = asyncio.get_running_loop().create_task(self._heal())

    async def _heal(self) -> None:
        # A restarted Redis has forgotten our group memberships: join them all again.
        while not self.stopping:
            try:
                for group in list(self.waiters):
                    if not self.is_broadcast(group):
                        await self._join(group)
            except Exception:
                await asyncio.sleep(POLL_SECONDS)
                continue
            self.healthy = True
            log.info("channel layer is back; waiters listen again")
            return

    async def _join(self, group: str) -> None:
        """The layer's group_add in one round trip (channels_redis spends two)."""
        layer = self.layer
        if channels_redis.is_redis_layer(layer):
            await channels_redis.group_join(layer, group, self.channel)
        else:
            await layer.group_add(group, self.channel)

    async def add(self, group: str, queue: asyncio.Queue) -> None:
        if self.is_broadcast(group):  # heard already: nothing to join
            self.waiters.setdefault(group, set()).add(queue)
            return
        lingering = self.lingering.pop(group, None)
        if lingering is not None:
            lingering.cancel()  # still a member: the last waiter left a moment ago
        first = group not in self.waiters and lingering is None
        self.waiters.setdefault(group, set()).add(queue)
        if first and self.healthy:
            leaving = self.leaving.get(group)
            if leaving is not None:  # its discard is on the wire: join after it
                await asyncio.wait([leaving])
            try:
                await self._join(group)
            except Exception:  # the waiter polls; the group is joined once the layer is back
                log.warning("channel layer unreachable; waiters poll the database")
                self.unhealthy()

    def _leave_later(self, group: str) -> None:
        if self.lingering.pop(group, None) is None or group in self.waiters:
            return
        self.leaving[group] = task = asyncio.get_running_loop().create_task(self._leave(group))
        task.add_done_callback(lambda _: self.leaving.pop(group, None))

    async def _leave(self, group: str) -> None:
        with contextlib.suppress(Exception):
            await self.layer.group_discard(group, self.channel)

    async def remove(self, group: str, queue: asyncio.Queue) -> None:
        queues = self.waiters.get(group)
        if queues is None:
            return
        queues.discard(queue)
        loop = asyncio.get_running_loop()
        if not queues:
            del self.waiters[group]
            if self.is_broadcast(group):
                pass  # never joined
            elif loop is publisher.server_loop:
                # The server's own loop lives as long as the process: its hub keeps
                # listening for the next waiter instead of stopping and starting again for
                # every request, and stays in a group it no longer needs for a moment, as
                # the next wait on the same thread (a resume after a pause) usually comes
                # right after.
                self.lingering[group] = loop.call_later(LINGER_SECONDS, self._leave_later, group)
            else:
                await self._leave(group)
        if loop is publisher.server_loop:
            return
        # Checked and flagged without an await in between, so no waiter can join a
        # hub that is about to stop (add() only picks hubs that are not stopping).
        if not self.waiters and not self.stopping:
            self.stopping = True
            if _hubs.get(loop) is self:
                del _hubs[loop]
            try:
                await self.layer.send(self.channel, {"type": self.STOP})
            except Exception:  # the layer is down: stop the receiver directly
                if self.task is not None:
                    self.task.cancel()
            if self._healing is not None:
                self._healing.cancel()
            if self.broadcast_task is not None:
                self.broadcast_task.cancel()
            # Short-lived loops (async_to_sync) must not close with a task pending.
            await asyncio.wait(
                [task for task in (self.task, self.broadcast_task) if task is not None],
                timeout=5,
            )


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Hub] = weakref.WeakKeyDictionary()


async def _hub() -> _Hub | None:
    layer = get_channel_layer()
    if layer is None:
        return None
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is None or hub.stopping or (hub.task is not None and hub.task.done()):
        hub = _Hub(layer)
        _hubs[loop] = hub  # registered before the first await: one hub per loop
        await hub.start()
    else:
        await hub.ready.wait()
    return hub


class ThreadSubscription:
    """The messages of one thread's channel group, queued for one waiter.

    `status_only` listens to status changes alone: a waiter that only needs to know
    when a run ends is not woken by every streamed event of the run.
    """

    def __init__(self, thread_id: Any, *, status_only: bool = False):
        self.thread_id = str(thread_id)
        self.last_seq: str | None = None
        # Whether `run_events_of` heard its run's end live (else it read it in the database).
        self.heard_end = False
        self.group = (listeners.thread_status_group if status_only else listeners.thread_group)(
            thread_id
        )
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._hub: _Hub | None = None

    async def open(self) -> ThreadSubscription:
        hub = await _hub()
        if hub is not None:  # without a channel layer, waiters fall back to polling
            await hub.add(self.group, self.queue)
            self._hub = hub
        return self

    @property
    def recheck_seconds(self) -> float:
        """How long a waiter may rely on messages before reading the database again."""
        hub = self._hub
        return RECHECK_SECONDS if hub is not None and hub.listening else POLL_SECONDS

    async def get(self, timeout: float) -> dict[str, Any] | None:
        """The next message, or None after `timeout` seconds."""
        # Not asyncio.wait_for: on Python 3.11 it returns a message that arrived as its
        # task was cancelled and drops the cancel (a stream whose client left went on).
        try:
            async with asyncio.timeout(max(timeout, 0.0)):
                return await self.queue.get()
        except TimeoutError:
            return None

    async def close(self) -> None:
        hub, self._hub = self._hub, None
        if hub is not None:
            with contextlib.suppress(Exception):
                await hub.remove(self.group, self.queue)

    async def __aenter__(self) -> ThreadSubscription:
        return await self.open()

    async def __aexit__(self, *exc) -> None:
        await self.close()


def is_run_end(message: dict[str, Any]) -> bool:
    """A message after which a run's status may have changed to an end.

    A thread that became busy announced a run's start (a waiter's own, as often as
    not), unless the announcement says a run ended on the way.
    """
    if message.get("type") == "thread.changed":
        return message.get("status") != "busy" or bool(message.get("run_ended"))
    if message.get("type") == "thread.event":
        return (message.get("event") or {}).get("type") in ("RUN_FINISHED", "RUN_ERROR")
    return False


def _run_row(run_id: Any) -> Run | None:
    return Run.objects.select_related("thread").filter(pk=run_id).one_or_none()


_fetch_run = released(_run_row)


async def fetch_run(run_id: Any) -> Run | None:
    return await _fetch_run(run_id)


def _thread_status(thread_id: Any) -> str | None:
    return Thread.objects.filter(pk=thread_id).values_list("status", flat=True).one_or_none()


_fetch_thread_status = released(_thread_status)


UNREAD = object()


async def waiter_read(query: Callable[[], Awaitable[Any]]) -> Any:
    """A waiter's read; UNREAD when the database is briefly away (the waiter reads again).

    Once a run exists, a dropped connection must not turn a wait into an error: the
    client would repeat a request whose run is already under way.
    """
    try:
        return await query()
    except Exception as exc:
        if not is_transient(exc):
            raise
        suspect_connections()  # the next reads get checked connections
        await sync_to_async(_drop_broken_connections)()
        return UNREAD


def _drop_broken_connections() -> None:
    close_old_connections()
    # The server dropped the pool's other sessions too: replace them all at once. Found
    # one by one at checkout, each costs the next read a longer pause (1 s, 2 s, 4 s...),
    # and a wait could end in Unavailable though the database was back at once.
    discard_dead_connections()


async def wait_for_run(
    run_id: Any,
    timeout: float,
    *,
    subscription: ThreadSubscription | None = None,
    known: Run | None = None,
    fetch: Callable[[Any], Awaitable[Run | None]] | None = None,
    ended: Callable[[events.RunEnd], Run] | None = None,
) -> Run | None:
    """Return the run once it is terminal (interrupted, success, error, cancelled).

    At `timeout` the run is returned as it is (check `run.status`); None when there
    is no such run. Pass an open `subscription` to cover events sent before this
    call (e.g. one opened before the run was created), and the run as `known` when it
    was read (or created) after that subscription opened: no need to read it again.
    `fetch` replaces the read of the run (e.g. one that also prepares the answer, so
    the final read and the answer share one hop to a worker thread). `ended` turns the
    run end a worker announced (committed before it was sent) into the returned run,
    so no read is needed at all.
    """
    fetch_run_ = fetch or fetch_run
    if known is not None and subscription is not None:
        run: Any = known
    else:
        run = await waiter_read(lambda: fetch_run_(run_id))
    if run is None or (run is not UNREAD and run.status in TERMINAL):
        return run
    own = subscription is None
    if subscription is None and run is UNREAD:
        return await _poll_run(run_id, timeout)
    sub = subscription or await ThreadSubscription(run.thread_id, status_only=True).open()
    if own:  # read again now that we listen: a change in between is not missed
        run = await waiter_read(lambda: fetch_run_(run_id))
    deadline = time.monotonic() + timeout
    last: Any = UNREAD
    try:
        while True:
            if run is not UNREAD:
                last = run
                if run is None or run.status in TERMINAL:
                    return run
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return _known(last)
            recheck = POLL_SECONDS if run is UNREAD else sub.recheck_seconds
            wait_until = time.monotonic() + min(remaining, recheck)
            while (left := wait_until - time.monotonic()) > 0:
                message = await sub.get(left)
                if message is None or is_run_end(message):
                    break
            end = (message or {}).get("run_end")
            if ended is not None and end is not None and end.get("run_id") == str(run_id):
                return ended(end)
            run = await waiter_read(lambda: fetch_run_(run_id))
    finally:
        if own:
            await sub.close()


def _known(value: Any) -> Any:
    if value is UNREAD:  # the database never answered during the whole wait
        raise Unavailable("The database is unreachable; try again shortly.")
    return value


async def _poll_run(run_id: Any, timeout: float) -> Run | None:
    """Wait without a subscription (the database was away when the wait began)."""
    deadline = time.monotonic() + timeout
    last: Any = UNREAD
    while True:
        run = await waiter_read(lambda: fetch_run(run_id))
        if run is not UNREAD:
            last = run
            if run is None or run.status in TERMINAL:
                return run
        if time.monotonic() >= deadline:
            return _known(last)
        await asyncio.sleep(POLL_SECONDS)


async def thread_wait_for_status(thread_id: Any, statuses: Any, timeout: float) -> str | None:
    """Return the thread's status once it is one of `statuses`, or its status at timeout."""
    wanted = set(statuses)
    last: Any = UNREAD
    # A run's start ("busy") is announced on the thread's full group only.
    status_only = Thread.Status.BUSY not in wanted
    async with ThreadSubscription(thread_id, status_only=status_only) as sub:
        deadline = time.monotonic() + timeout
        while True:
            status = await waiter_read(lambda: _fetch_thread_status(thread_id))
            remaining = deadline - time.monotonic()
            if status is not UNREAD:
                last = status
                if status is None or status in wanted:
                    return status
            if remaining <= 0:
                return _known(last)
            recheck = POLL_SECONDS if status is UNREAD else sub.recheck_seconds
            wait_until = time.monotonic() + min(remaining, recheck)
            while (left := wait_until - time.monotonic()) > 0:
                message = await sub.get(left)
                if message is None or message.get("type") == "thread.changed":
                    break
