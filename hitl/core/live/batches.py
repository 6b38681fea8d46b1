"""A run's stream events on their way out of the engine's loop: logged and sent in batches.

Each append to the event log is a Redis round trip. While someone listens live (the last
append counted a member of the thread's group) a batch goes out at once, one append in
flight at a time, the events that come meanwhile riding the next. While nobody does, the
events wait up to FLUSH_SECONDS: a run that ends sooner logs its whole stream in one
append. Nothing is lost to a listener that joins meanwhile: a stream subscribes before it
reads the log, and the next append counts it and sends it the batch live. The log keeps
the events' order (appends never overlap), and `close` logs the rest before the run's
end is recorded, so RUN_FINISHED follows them.

Without Redis (the embedded default) an append is a memory write and a hand-off to the
publisher's loop: events go out at once, on the loop, without a thread hop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hitl.core.live import eventlog, events

# While nobody listens live, how long events may wait for the next append.
FLUSH_SECONDS = 0.05
# A batch this big goes out at once: appends stay small, and so does what a worker
# holds for a run.
MAX_BATCH = 256


class EventBatches:
    """The batches of one run's stream events; used on one event loop."""

    def __init__(self, thread_id: Any) -> None:
        self.thread_id = thread_id
        self._pending: list[dict[str, Any]] = []
        # Whether the last append found a live listener: then batches go out at once.
        self._heard = events.last_heard(thread_id)
        self._timer: asyncio.TimerHandle | None = None
        self._sending: asyncio.Task | None = None

    def add(self, batch: list[dict[str, Any]]) -> None:
        if not eventlog.enabled():
            events.publish_thread_events(self.thread_id, batch)  # memory: no round trip
            return
        self._pending.extend(batch)
        if self._sending is not None:
            return  # it takes these along when it is done
        if self._heard or len(self._pending) >= MAX_BATCH:
            self._send_soon()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(FLUSH_SECONDS, self._send_soon)

    def _send_soon(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._sending is None and self._pending:
            self._sending = asyncio.get_running_loop().create_task(self._send())

    async def _send(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                self._heard = await events.apublish_thread_events(self.thread_id, batch)
                if not self._heard and len(self._pending) < MAX_BATCH:
                    break
        finally:
            self._sending = None
        if self._pending and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(FLUSH_SECONDS, self._send_soon)

    async def close(self) -> None:
        """Log and send what waits; returns once every event is out."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._sending is not None or self._pending:
            sending = self._sending
            if sending is None:
                self._send_soon()
                sending = self._sending
            # Shielded: a run stopped meanwhile still logs what it streamed.
            await asyncio.shield(sending)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
