"""A graph's input and state as JSON Schema, also where pydantic cannot read the state."""

from __future__ import annotations

import enum
from typing import Annotated, Literal, TypedDict

import jsonschema
from langchain_core.messages import AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps

from agents.graphs.demo import demo_graph
from agents.graphs.triage import triage_graph
from agents.schema import MESSAGES_SCHEMA, input_schema, is_messages, state_schema


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Plain(TypedDict):
    """A `typing.TypedDict`: pydantic refuses it whole on Python 3.11."""

    name: str
    colour: Colour
    shade: Colour | None
    size: Literal["s", "m"]


def _graph(state):
    return (
        StateGraph(state).add_node("n", lambda s: {}).add_edge(START, "n").add_edge("n", END)
    ).compile()


def test_a_typing_typeddict_input_is_read_key_by_key_with_shared_definitions():
    schema = input_schema(_graph(Plain))
    assert list(schema["properties"]) == ["name", "colour", "shade", "size"]
    assert set(schema["required"]) == {"name", "colour", "shade", "size"}
    assert schema["$defs"]["Colour"]["enum"] == ["red", "blue"]
    assert schema["properties"]["size"]["enum"] == ["s", "m"]
    # The hoisted definitions resolve: the schema checks values as the graph declares them.
    validator = jsonschema.Draft202012Validator(schema)
    assert not list(
        validator.iter_errors({"name": "a", "colour": "red", "shade": None, "size": "m"})
    )
    assert [
        e.message
        for e in validator.iter_errors(
            {"name": "a", "colour": "green", "shade": "blue", "size": "m"}
        )
    ] == ["'green' is not one of ['red', 'blue']"]


def test_messages_are_offered_as_a_message_list_and_managed_values_are_left_out():
    class Chat(TypedDict, total=False):
        messages: Annotated[list[AnyMessage], add_messages]
        remaining_steps: RemainingSteps
        topic: str

    schema = input_schema(_graph(Chat))
    assert schema["properties"]["messages"] == MESSAGES_SCHEMA
    assert is_messages(schema["properties"]["messages"])
    assert "remaining_steps" not in schema["properties"]
    assert "required" not in schema


def test_the_built_in_graphs_describe_their_input():
    assert is_messages(input_schema(demo_graph)["properties"]["messages"])
    triage = input_schema(triage_graph)
    assert triage["properties"]["seats"]["type"] == "integer"
    assert "queue" not in triage["properties"]  # state, not input
    assert "queue" in state_schema(triage_graph)["properties"]


def test_a_state_without_type_hints_has_no_schema():
    assert input_schema(object()) is None
