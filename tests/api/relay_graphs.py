"""A graph whose run a test holds open at two gates: the reconnect tests restart daphne
while it waits, then let it go (HITL_EXTRA_GRAPHS=RELAY_GRAPHS).

`relay` writes RELAY_TICKS custom chunks per node over three nodes; `first` waits for the
file `open-a` in the run's `dir` after its ticks and `second` for `open-b`, each marking
`at-<gate>` when it gets there. So the parts of `second` are made while the test chooses
(daphne down: they are only in the event log) and those of `third` after it lets them.

`gated` streams nothing before gate `a` (its first node waits there first, then ticks),
so a stream of it has had only its `metadata` part while the run waits.
"""

from __future__ import annotations

import operator
import time
from pathlib import Path
from typing import Annotated, Any

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

TARGETS = {
    "relay": "tests.api.relay_graphs:relay_graph",
    "gated": "tests.api.relay_graphs:gated_graph",
}
RELAY_GRAPHS = ",".join(f"{name}={target}" for name, target in TARGETS.items())
RELAY_TICKS = 3
GATE_SECONDS = 90


class RelayState(TypedDict, total=False):
    dir: str
    legs: Annotated[list[str], operator.add]


def gate(folder: str, name: str) -> None:
    """Mark that the run reached gate `name`, then wait for the test to open it."""
    path = Path(folder)
    (path / f"at-{name}").touch()
    deadline = time.monotonic() + GATE_SECONDS
    while not (path / f"open-{name}").exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def _leg(index: int, name: str, gate_name: str | None):
    def node(state: RelayState) -> dict[str, Any]:
        write = get_stream_writer()
        for i in range(RELAY_TICKS):
            write({"tick": index * RELAY_TICKS + i})
        if gate_name:
            gate(state["dir"], gate_name)
        return {"legs": [name]}

    return node


_relay = StateGraph(RelayState)
_relay.add_node("first", _leg(0, "first", "a"))
_relay.add_node("second", _leg(1, "second", "b"))
_relay.add_node("third", _leg(2, "third", None))
_relay.add_edge(START, "first")
_relay.add_edge("first", "second")
_relay.add_edge("second", "third")
_relay.add_edge("third", END)
relay_graph = _relay.compile()


def _gated_leg(index: int, name: str, gate_name: str | None):
    def node(state: RelayState) -> dict[str, Any]:
        if gate_name:
            gate(state["dir"], gate_name)
        write = get_stream_writer()
        for i in range(RELAY_TICKS):
            write({"tick": index * RELAY_TICKS + i})
        return {"legs": [name]}

    return node


_gated = StateGraph(RelayState)
_gated.add_node("late", _gated_leg(0, "late", "a"))
_gated.add_node("after", _gated_leg(1, "after", None))
_gated.add_edge(START, "late")
_gated.add_edge("late", "after")
_gated.add_edge("after", END)
gated_graph = _gated.compile()
