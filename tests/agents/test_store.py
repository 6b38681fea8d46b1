"""The embedded store (LangGraph's SQLite store) as graphs get it: bound by the registry,
read through the `store` argument and `get_store()`, shared with the sync store."""

from __future__ import annotations

import asyncio

from langgraph.checkpoint.memory import InMemorySaver

from agents.registry import with_checkpointer
from agents.store import aclose_stores, astore_for, store_for
from tests.api.parity_graphs import memory_graph


def test_a_graph_bound_to_the_sqlite_store_remembers_across_runs(tmp_path):
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"

    async def twice():
        graph = with_checkpointer(memory_graph, InMemorySaver(), await astore_for(url))
        config = {"configurable": {"thread_id": "t"}}
        first = await graph.ainvoke({"user": "ann"}, config)
        second = await graph.ainvoke({"user": "ann"}, {"configurable": {"thread_id": "u"}})
        await aclose_stores()
        return first, second

    first, second = asyncio.run(twice())
    assert (first["count"], second["count"], second["via_get_store"]) == (1, 2, 2)
    # The sync store (the API's) reads what the graph wrote.
    assert store_for(url).get(("visits", "ann"), "count").value == {"n": 2}
