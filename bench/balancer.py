"""A TCP balancer for benchmarks: what a load balancer in front of web processes does.

Each new client connection goes to the next upstream port in turn that is not being
drained and accepts the connection (a refused one is skipped, as a balancer's health
check would). Draining an upstream stops new connections to it; `settled(port)` says
when every connection still open to it has had the first bytes of its answer, so the
process can then be stopped without cutting a request before its response began
(a long-poll that has begun its answer is reconnected by the client to its Location).

Clients should send `Connection: close`, so that every request is balanced on its own,
as an HTTP balancer does; the balancer itself is byte-for-byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading


class _Link:
    def __init__(self, port: int) -> None:
        self.port = port
        self.answered = False


class Balancer:
    def __init__(self, port: int, upstreams: list[int]) -> None:
        self.port = port
        self.upstreams = list(upstreams)
        self.draining: set[int] = set()
        self.links: set[_Link] = set()
        self.refused = 0  # connections no upstream accepted
        self._tasks: set[asyncio.Task] = set()  # held, so none is collected mid-copy
        self._turn = itertools.count()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="balancer", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def drain(self, port: int) -> None:
        with self._lock:
            self.draining.add(port)

    def undrain(self, port: int) -> None:
        with self._lock:
            self.draining.discard(port)

    def open_to(self, port: int) -> int:
        with self._lock:
            return sum(1 for link in self.links if link.port == port)

    def settled(self, port: int) -> bool:
        """Every connection open to `port` has begun its answer."""
        with self._lock:
            return all(link.answered for link in self.links if link.port == port)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._client, "127.0.0.1", self.port, backlog=512)
        )
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()

    def _candidates(self) -> list[int]:
        with self._lock:
            live = [p for p in self.upstreams if p not in self.draining]
        start = next(self._turn)
        return [live[(start + i) % len(live)] for i in range(len(live))] if live else []

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._forward(reader, writer)
        finally:
            self._tasks.discard(task)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for port in self._candidates():
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                continue
            break
        else:
            self.refused += 1
            writer.close()
            return
        link = _Link(port)
        with self._lock:
            self.links.add(link)
        try:
            await asyncio.gather(
                self._pipe(reader, up_writer, None), self._pipe(up_reader, writer, link)
            )
        finally:
            with self._lock:
                self.links.discard(link)
            for w in (writer, up_writer):
                w.close()

    @staticmethod
    async def _pipe(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link | None
    ) -> None:
        try:
            while data := await reader.read(65536):
                if link is not None:
                    link.answered = True
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if writer.can_write_eof():
                with contextlib.suppress(ConnectionError, OSError):
                    writer.write_eof()
