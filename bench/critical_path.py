"""Where a one-client cycle's wall time goes: the critical path, read off the wire.

At one client nothing overlaps: the client waits on the web process, the web on the
worker, the worker on Postgres and Redis, one after the other. A capture of the
loopback traffic while `bench/peers.py` drives HITL's production shape with one client
shows when each hop starts. This script reads such a capture and prints, for each half of
the cycle, the median time from its start to each milestone:

    .venv/bin/python bench/peers.py --systems hitl-prod --clients 1 --cycles 800 &
    # once it prints "hitl-prod up at", as root (apt-get install tcpdump):
    timeout 3 tcpdump -i lo -nn -tt -s 400 -A 'tcp and (len > 66)' > /tmp/cycle.txt
    .venv/bin/python bench/critical_path.py /tmp/cycle.txt

Half 1 starts when `threads.create` arrives, half 2 when the resuming `runs.wait` does
(the same halves as bench/peers.py). Postgres is 127.0.0.1:5432 and Redis :6379 (the
bench's own databases); the HTTP port is the one `POST /langgraph/threads` goes to.
Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

PG, REDIS = "5432", "6379"
HEADER = re.compile(r"^(\d+\.\d+) IP (\S+) > (\S+): .*$", re.MULTILINE)
# kombu's unacked entry for a delivery carries its score (a timestamp); the ack does not.
DELIVERY = re.compile(r"unacked\.*\$\d+\.*\d{9,}\.\d")

Packet = tuple[float, str, str, str]  # time, source port, destination port, payload


def packets(text: str) -> list[Packet]:
    """The capture's packets: tcpdump -tt -A prints a header line, then the payload."""
    headers = list(HEADER.finditer(text))
    out: list[Packet] = []
    for match, after in zip(headers, [*headers[1:], None], strict=True):
        payload = text[match.end() : after.start() if after else len(text)].replace("\n", "")
        source, destination = (match.group(i).rsplit(".", 1)[1] for i in (2, 3))
        out.append((float(match.group(1)), source, destination, re.sub(r"[^ -~]", ".", payload)))
    return out


def half_marks(half: list[Packet], http: str, first_half: bool) -> dict[str, float]:
    """Milliseconds from the half's first packet to each milestone found in it."""
    marks: dict[str, float] = {}

    def first(pred: Callable[[Packet], bool], start: int | None = 0) -> int | None:
        if start is None:  # the milestone it follows is missing
            return None
        return next((i for i in range(start, len(half)) if pred(half[i])), None)

    def mark(name: str, i: int | None) -> int | None:
        if i is not None:
            marks[name] = (half[i][0] - half[0][0]) * 1000
        return i

    start: int | None = 0
    if first_half:
        mark("web: the thread's INSERT sent", first(lambda p: p[2] == PG))
        mark(
            "web: threads.create answered",
            first(lambda p: p[1] == http and "HTTP/1.1 200" in p[3]),
        )
        start = mark(
            "client: runs.wait arrives", first(lambda p: p[2] == http and "/runs/wait" in p[3])
        )
    mark("web: its first statement sent", first(lambda p: p[2] == PG, start))
    send = mark("web: the Celery send (LPUSH)", first(lambda p: p[2] == REDIS and "LPUSH" in p[3]))
    delivery = mark(
        "worker: the delivery (its unacked entry)",
        first(lambda p: p[2] == REDIS and DELIVERY.search(p[3]) is not None, send),
    )
    lease = mark("worker: the lease sent", first(lambda p: p[2] == PG, delivery))
    read = first(lambda p: p[1] == PG and "checkpoint_ns" in p[3], lease)
    heard = first(lambda p: p[1] == REDIS and "asgi:broadcast" in p[3], lease)
    if read is None or heard is None:
        return marks
    mark("worker: the checkpoint read answered", read)
    statements = [i for i in range(read, heard) if half[i][2] == PG]
    if len(statements) >= 2:
        mark("worker: the last checkpoint write sent", statements[-2])
    if statements:
        mark("worker: the run's end sent", statements[-1])
    mark("web: hears the end (broadcast)", heard)
    mark(
        "web: the answer's body out",
        first(lambda p: p[1] == http and "HTTP/1.1" not in p[3], heard),
    )
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("capture", type=Path, help="tcpdump -tt -A output (see above)")
    args = parser.parse_args()
    every = packets(args.capture.read_text(errors="replace"))
    http = next(
        (p[2] for p in every if "POST /langgraph/threads HTTP" in p[3]),
        None,
    )
    if http is None:
        raise SystemExit("no POST /langgraph/threads in the capture")
    cycles: list[list[Packet]] = []
    for packet in every:
        if packet[2] == http and "POST /langgraph/threads HTTP" in packet[3]:
            cycles.append([])
        if cycles:
            cycles[-1].append(packet)
    cycles = cycles[1:-1]  # the capture cut the first and the last
    found: dict[tuple[int, str], list[float]] = defaultdict(list)
    for cycle in cycles:
        waits = [i for i, p in enumerate(cycle) if p[2] == http and "/runs/wait" in p[3]]
        if len(waits) < 2:
            continue
        for number, half in ((1, cycle[: waits[1]]), (2, cycle[waits[1] :])):
            for name, ms in half_marks(half, http, number == 1).items():
                found[(number, name)].append(ms)
    print(f"{len(cycles)} whole cycles; median ms from the half's start (n = cycles with it)")
    for (number, name), values in sorted(
        found.items(), key=lambda item: (item[0][0], statistics.median(item[1]))
    ):
        print(f"half {number}  {statistics.median(values):6.2f}  (n={len(values):3d})  {name}")


if __name__ == "__main__":
    main()
