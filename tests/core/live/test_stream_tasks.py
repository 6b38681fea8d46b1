"""A node's start, from LangGraph's "tasks" stream mode, as an AG-UI CUSTOM event."""

from __future__ import annotations

from hitl.core.live.agui import NODE_STARTED, STREAM_MODES, events_for_chunk


def test_a_task_start_names_its_node():
    assert "tasks" in STREAM_MODES
    events = events_for_chunk("tasks", {"id": "t1", "name": "agent", "input": {}, "triggers": []})
    assert [{k: v for k, v in e.items() if k != "timestamp"} for e in events] == [
        {"type": "CUSTOM", "name": NODE_STARTED, "value": {"node": "agent"}}
    ]


def test_a_task_end_and_internal_tasks_say_nothing():
    assert (
        events_for_chunk("tasks", {"id": "t1", "name": "agent", "result": [], "error": None}) == []
    )
    assert events_for_chunk("tasks", {"id": "t2", "name": "__start__", "input": {}}) == []
    assert events_for_chunk("tasks", "not a dict") == []
