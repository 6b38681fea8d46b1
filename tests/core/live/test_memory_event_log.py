"""The event log of a process without Redis: entries expire an hour after their thread's
last event, and expiring does not walk every thread the process has seen."""

from __future__ import annotations

import pytest

from hitl.core.live import eventlog


@pytest.fixture
def clock(monkeypatch):
    now = {"t": 1_000_000.0}
    monkeypatch.setattr(eventlog.time, "time", lambda: now["t"])
    return now


def test_a_thread_quiet_for_an_hour_is_forgotten_and_a_busy_one_is_kept(clock):
    log = eventlog._MemoryLog()
    for name in ("a", "b", "c"):
        log.append(name, {"type": "x", "thread": name})
        log.set_modes(name, f"run-{name}", ["values"])
    clock["t"] += eventlog.TTL_SECONDS - 10
    log.append("a", {"type": "later"})  # "a" is touched again; "b" and "c" are not
    clock["t"] += 20  # b and c are now over the hour, a is not
    log.append("d", {"type": "x"})

    assert [row[1] for row in log.rows("a")] == [
        '{"type": "x", "thread": "a"}',
        '{"type": "later"}',
    ]
    assert log.rows("b") == [] and log.rows("c") == []
    assert len(log.rows("d")) == 1
    # A run's stream modes expire an hour after they were set.
    assert log.modes("run-a") is None and log.modes("run-b") is None


def test_expiring_stops_at_the_first_thread_still_within_the_hour(clock):
    log = eventlog._MemoryLog()
    for n in range(1000):
        log.append(f"t{n}", {"n": n})
    looked: list[str] = []
    touched = log._touched

    class Counting(type(touched)):
        def items(self):
            for key, value in super().items():
                looked.append(key)
                yield key, value

    log._touched = Counting(touched)
    clock["t"] += 1
    log.append("t5", {"n": "again"})
    assert looked == ["t0"]  # one look, not a thousand
    assert list(log._touched)[-1] == "t5"  # the touched thread moved to the end
