"""New thread: the form built from the graph's input schema, its checks, and its fallbacks."""

from __future__ import annotations

import json
import re
import sys
import types
from typing import Any, Literal, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from hitl.core.models import AuditEvent, Run, Thread
from hitl.core.registry import registry
from hitl.core.runs import inputs

# What valid_ticket's fields become: typed, lines split and trimmed, the box ticked.
TICKET_INPUT = {
    "summary": "The printer is on fire",
    "customer": "ACME",
    "priority": "urgent",
    "seats": 12,
    "contract_value": 1500.5,
    "tags": ["hardware", "fire"],
    "notify_customer": True,
}
TICKET = {
    "graph": "ticket_triage",
    "title": "Printer on fire",
    "mode": "form",
}


def ticket_fields(client, graph: str = "ticket_triage") -> dict[str, str]:
    """key -> form field name, read from the rendered page."""
    html = client.get(f"/threads/new/?graph={graph}").content.decode()
    return {key: name for name, key in re.findall(r'name="(arg_\d+)"[^>]*data-key="([^"]+)"', html)}


def valid_ticket(names: dict[str, str], **override: str) -> dict[str, str]:
    values = {
        "summary": "The printer is on fire",
        "customer": "ACME",
        "priority": json.dumps("urgent"),
        "seats": "12",
        "contract_value": "1500.50",
        "tags": "hardware\r\n\r\n  fire \r\n",
        "notify_customer": "on",
        **override,
    }
    return {**TICKET, **{names[k]: v for k, v in values.items() if v is not None}}


def nothing_created() -> bool:
    return not Thread.objects.exists() and not Run.objects.exists()


@pytest.fixture
def started(settings, db):
    settings.HITL_EXECUTOR = "manual"


# --- the form ----------------------------------------------------------------------


def test_the_form_has_one_typed_input_per_key_of_the_graphs_input(client_for, requester):
    html = client_for(requester).get("/threads/new/?graph=ticket_triage").content.decode()
    assert 'data-key="summary"' in html and 'data-type="string"' in html
    assert 'type="number"' in html and 'data-key="seats"' in html  # an integer
    assert 'data-type="number" data-key="contract_value"' in html  # a float
    assert '<select name="arg_2"' in html and "&quot;urgent&quot;" in html  # an enum
    assert 'data-type="lines"' in html  # a list of strings, one per line
    assert 'type="checkbox"' in html  # a boolean
    assert "Advanced (JSON)" in html and 'id="start-json" class="start-json field" hidden' in html
    assert 'id="start-form-fields" class="start-fields" data-graph="ticket_triage">' in html


def test_a_valid_form_starts_the_thread_with_typed_values(client_for, requester, started):
    client = client_for(requester)
    names = ticket_fields(client)
    response = client.post("/threads/new/", valid_ticket(names))
    assert response.status_code == 302
    run = Run.objects.get()
    assert run.input == TICKET_INPUT
    assert run.thread.title == "Printer on fire" and run.thread.requester == requester
    assert response["Location"] == f"/threads/{run.thread_id}/"


def test_the_thread_page_follows_the_run_it_was_opened_for(client_for, requester, started):
    client = client_for(requester)
    response = client.post("/threads/new/", valid_ticket(ticket_fields(client)))
    page = client.get(response["Location"]).content.decode()
    assert 'data-follow="1"' in page and 'id="run-outcome"' in page
    # Once: a later visit is an ordinary thread page.
    assert 'data-follow="1"' not in client.get(response["Location"]).content.decode()


@pytest.mark.parametrize(
    ("override", "key", "error"),
    [
        ({"seats": "twelve"}, "seats", "Enter a whole number."),
        ({"seats": "1" * 40}, "seats", "too large"),
        ({"seats": "9" * 5000}, "seats", "Enter a whole number."),
        ({"contract_value": "1e999"}, "contract_value", "must be a finite number"),
        ({"contract_value": "NaN"}, "contract_value", "must be a finite number"),
        ({"contract_value": "abc"}, "contract_value", "Enter a number."),
        ({"priority": json.dumps("whenever")}, "priority", "Select a valid choice"),
        ({"summary": ""}, "summary", "Required."),
        ({"customer": None}, "customer", "Required."),
        ({"summary": "nul\x00byte"}, "summary", "Null characters are not allowed."),
        ({"tags": "ok\r\nnul\x00"}, "tags", "Null characters are not allowed."),
    ],
)
def test_a_bad_field_is_refused_inline_and_nothing_is_created(
    client_for, requester, started, override, key, error
):
    client = client_for(requester)
    names = ticket_fields(client)
    response = client.post("/threads/new/", valid_ticket(names, **override))
    assert response.status_code == 400
    html = response.content.decode()
    assert "Nothing was started: fix the highlighted fields." in html
    field = html.split(f'data-key="{key}"', 1)[1].split('class="field ', 1)[0]
    assert error.replace('"', "&quot;") in field or error in field, field[:600]
    assert nothing_created()
    assert not AuditEvent.objects.exists()


def test_a_refused_form_keeps_what_was_typed(client_for, requester, started):
    client = client_for(requester)
    names = ticket_fields(client)
    html = client.post("/threads/new/", valid_ticket(names, seats="-x")).content.decode()
    assert 'value="The printer is on fire"' in html and 'value="ACME"' in html


def test_an_unknown_graph_is_an_inline_error(client_for, requester, started):
    response = client_for(requester).post(
        "/threads/new/", {"graph": "no_such_graph", "mode": "json", "input": "{}"}
    )
    assert response.status_code == 400
    assert "Select a valid choice. no_such_graph is not one of" in response.content.decode()
    assert nothing_created()
    # And for the fields fragment: the default graph's, never a 500.
    assert client_for(requester).get("/threads/new/?graph=nope&partial=1").status_code == 200


# --- advanced (JSON) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("[1, 2]", "Input must be a JSON object."),
        ('{"summary": ', "Input is not valid JSON"),
        ('{"summary": "a\\u0000b"}', "must not contain NUL"),
        ('{"summary": "\\ud800"}', "lone UTF-16 surrogates"),
        ('{"seats": 1e999}', "must be a finite number"),
        ('{"seats": 123456789012345678901234567890}', "too large"),
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
        ('{"a": ' * 100 + "1" + "}" * 100, "nested too deeply"),
        ('{"summary": 5, "customer": "x"}', "summary: 5 is not of type &#x27;string&#x27;"),
        ('{"customer": "x"}', "summary: Required."),
    ],
)
def test_bad_json_is_refused_inline_and_nothing_is_created(
    client_for, requester, started, raw, error
):
    response = client_for(requester).post(
        "/threads/new/", {"graph": "ticket_triage", "mode": "json", "input": raw}
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert error in html, html[html.find("start-json") :][:800]
    assert nothing_created()


def test_valid_json_starts_the_thread_as_it_is(client_for, requester, started):
    body = {
        "summary": "s",
        "customer": "c",
        "priority": "low",
        "seats": 1,
        "contract_value": 2,
        "tags": [],
        "notify_customer": False,
    }
    response = client_for(requester).post(
        "/threads/new/", {"graph": "ticket_triage", "mode": "json", "input": json.dumps(body)}
    )
    assert response.status_code == 302
    assert Run.objects.get().input == body


def test_a_client_that_posts_only_json_still_starts_a_thread(client_for, requester, started):
    response = client_for(requester).post(
        "/threads/new/", {"graph": "approval", "title": "t", "input": '{"to": "a@b.c"}'}
    )
    assert response.status_code == 302
    assert Run.objects.get().input == {"to": "a@b.c"}


# --- message-based agents ----------------------------------------------------------------


def test_a_message_agent_gets_a_message_box(client_for, requester, started):
    client = client_for(requester)
    html = client.get("/threads/new/?graph=demo").content.decode()
    assert "More input fields" in html
    (name,) = re.findall(r'name="(arg_\d+)"[^>]*data-key="messages" data-type="message"', html)
    response = client.post(
        "/threads/new/", {"graph": "demo", "mode": "form", name: "Report on Q3, please"}
    )
    assert response.status_code == 302
    assert Run.objects.get().input == {
        "messages": [{"role": "user", "content": "Report on Q3, please"}]
    }


def test_an_empty_form_for_the_demo_starts_it_with_an_empty_input(client_for, requester, started):
    response = client_for(requester).post("/threads/new/", {"graph": "demo", "mode": "form"})
    assert response.status_code == 302
    assert Run.objects.get().input == {}


# --- graphs registered in settings ---------------------------------------------------------


class Untyped:
    """A state class pydantic cannot describe."""

    def __init__(self, anything: Any) -> None:
        self.anything = anything


class OddState(TypedDict, total=False):
    name: str
    weird: Untyped
    points: list[dict[str, int]]
    mode: Literal["a", "b"] | None


def _odd_graph():
    return (
        StateGraph(OddState)
        .add_node("n", lambda s: {})
        .add_edge(START, "n")
        .add_edge("n", END)
        .compile()
    )


def _broken_graph():
    raise RuntimeError("cannot build")


@pytest.fixture
def extra_graphs(monkeypatch):
    module = types.ModuleType("w13_extra_graphs")
    module.odd = _odd_graph()
    module.broken = _broken_graph
    module.dict_state = (
        StateGraph(dict).add_node("n", lambda s: {}).add_edge(START, "n").add_edge("n", END)
    )
    monkeypatch.setitem(sys.modules, "w13_extra_graphs", module)
    for name in ("odd", "broken", "dict_state"):
        monkeypatch.setitem(registry.targets, name, f"w13_extra_graphs:{name}")
    monkeypatch.setattr(inputs, "_cache", {})


def test_an_unsupported_field_type_falls_back_to_json_for_that_field(
    client_for, requester, started, extra_graphs
):
    client = client_for(requester)
    html = client.get("/threads/new/?graph=odd").content.decode()
    assert 'data-key="weird" data-type="json"' in html
    assert 'data-key="points" data-type="json"' in html
    assert "null</textarea>" not in html  # empty until something is typed
    assert 'data-type="choice" data-key="mode"' in html
    names = ticket_fields(client, "odd")
    response = client.post(
        "/threads/new/",
        {
            "graph": "odd",
            "mode": "form",
            names["name"]: "x",
            names["weird"]: '{"any": [1, "thing"]}',
            names["points"]: '[{"x": 1}]',
            names["mode"]: json.dumps("b"),
        },
    )
    assert response.status_code == 302
    assert Run.objects.get().input == {
        "name": "x",
        "weird": {"any": [1, "thing"]},
        "points": [{"x": 1}],
        "mode": "b",
    }


def test_a_json_field_with_bad_json_is_refused_at_that_field(
    client_for, requester, started, extra_graphs
):
    client = client_for(requester)
    names = ticket_fields(client, "odd")
    response = client.post(
        "/threads/new/",
        {"graph": "odd", "mode": "form", names["points"]: '[{"x": "one"}]'},
    )
    assert response.status_code == 400
    assert "&#x27;one&#x27; is not of type &#x27;integer&#x27;" in response.content.decode()
    assert nothing_created()


@pytest.mark.parametrize("graph", ["broken", "dict_state"])
def test_a_graph_without_a_usable_schema_falls_back_to_the_json_editor(
    client_for, requester, started, extra_graphs, graph
):
    client = client_for(requester)
    response = client.get(f"/threads/new/?graph={graph}")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="start-note"' in html and "give" in html and "JSON" in html
    assert 'id="start-form-fields"' not in html and 'id="start-json"' in html
    assert client.get(f"/threads/new/?graph={graph}&partial=1").status_code == 200
