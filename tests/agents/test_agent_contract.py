"""The interrupt contract (agents/contract.py), without Django."""

from __future__ import annotations

import copy
from typing import Literal

import pytest
from pydantic import TypeAdapter

from agents import contract
from agents.contract import ContractError, check_response, classify, requests_for, resume_value

pytestmark = pytest.mark.filterwarnings("error")


def human_interrupt(**config) -> dict:
    flags = {"allow_accept": True, "allow_edit": True, "allow_respond": True, "allow_ignore": True}
    flags.update(config)
    return {
        "action_request": {
            "action": "send_email",
            "args": {"to": "a@example.com", "copies": 2, "ratio": 0.5, "urgent": False},
        },
        "config": flags,
        "description": "Send it?",
    }


HITL_REQUEST = {
    "action_requests": [
        {"name": "write_file", "args": {"path": "a.md", "size": 3}, "description": "Write"},
        {"name": "run_shell", "args": {"cmd": "ls"}},
    ],
    "review_configs": [
        {"action_name": "write_file", "allowed_decisions": ["approve", "edit", "reject"]},
        {"action_name": "run_shell", "allowed_decisions": ["approve", "reject", "respond"]},
    ],
}


def tool_approval_schema(allowed: list[str]) -> dict:
    """The JSON response_schema langchain's per-call HumanInTheLoopMiddleware publishes."""
    from langchain.agents.middleware.human_in_the_loop import _decision_schema
    from langchain_core.tools import tool

    @tool
    def send(to: str, copies: int) -> str:
        """Send something."""
        return "ok"

    return TypeAdapter(_decision_schema(allowed, "send", send)).json_schema()


TOOL_APPROVAL = {
    "type": "tool_approval",
    "tool_call_id": "call_1",
    "name": "send",
    "args": {"to": "bob", "copies": 1},
    "description": "Send to bob?",
}


def answer(value, response_schema=None, *responses):
    """Check each (type, args) against the value's requests; return the resume value."""
    kind, requests = requests_for(value, response_schema)
    answers = [
        (request, response_type, check_response(request, response_type, args))
        for request, (response_type, args) in zip(requests, responses, strict=True)
    ]
    return resume_value(kind, value, answers)


# --- classify -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (human_interrupt(), contract.KIND_HUMAN_INTERRUPT),
        ([human_interrupt(), human_interrupt()], contract.KIND_HUMAN_INTERRUPT_LIST),
        (HITL_REQUEST, contract.KIND_HITL_REQUEST),
        (TOOL_APPROVAL, contract.KIND_TOOL_APPROVAL),
        ("Which quarter?", contract.KIND_RAW),
        ({"question": "why"}, contract.KIND_RAW),
        ([], contract.KIND_RAW),
        ([human_interrupt(), "text"], contract.KIND_RAW),
        (None, contract.KIND_RAW),
        (42, contract.KIND_RAW),
        ({"action_request": {"action": 3}}, contract.KIND_RAW),
        ({"type": "tool_approval"}, contract.KIND_RAW),
        ({"action_requests": ["not a dict"], "review_configs": []}, contract.KIND_RAW),
    ],
)
def test_classify_names_the_schema_of_each_shape(value, kind):
    assert classify(value) == kind


# --- requests_for ---------------------------------------------------------------------


def test_human_interrupt_becomes_one_request_with_its_config():
    value = human_interrupt(allow_edit=False, allow_ignore=False)
    value["args_schema"] = {"type": "object"}
    value["reviewer_group"] = "finance"
    value["expires_in"] = 30
    kind, [request] = requests_for(value)
    assert kind == contract.KIND_HUMAN_INTERRUPT
    assert (request.position, request.action) == (0, "send_email")
    assert request.args == value["action_request"]["args"]
    assert request.description == "Send it?"
    assert request.allowed_types == ["accept", "response"]
    assert request.args_schema == {"type": "object"}
    assert request.reviewer_group == "finance"
    assert request.expires_in == 30.0


def test_human_interrupt_without_config_allows_nothing():
    value = {"action_request": {"action": "x", "args": {}}}
    _, [request] = requests_for(value)
    assert request.allowed_types == []
    with pytest.raises(ContractError, match="allowed: nothing"):
        check_response(request, "accept", None)


def test_malformed_config_is_treated_as_no_config():
    value = {"action_request": {"action": "x", "args": {}}, "config": ["allow_accept"]}
    _, [request] = requests_for(value)
    assert request.allowed_types == []


def test_human_interrupt_list_becomes_one_request_per_item_in_order():
    first, second = human_interrupt(), human_interrupt(allow_accept=False)
    second["action_request"]["action"] = "delete_file"
    kind, requests = requests_for([first, second])
    assert kind == contract.KIND_HUMAN_INTERRUPT_LIST
    assert [(r.position, r.action) for r in requests] == [(0, "send_email"), (1, "delete_file")]
    assert "accept" not in requests[1].allowed_types


def test_middleware_batch_maps_allowed_decisions_to_response_types():
    kind, requests = requests_for(HITL_REQUEST)
    assert kind == contract.KIND_HITL_REQUEST
    assert [r.action for r in requests] == ["write_file", "run_shell"]
    # reject can be sent as ignore (no message) or as response (a message).
    assert sorted(requests[0].allowed_types) == ["accept", "edit", "ignore", "response"]
    assert sorted(requests[1].allowed_types) == ["accept", "ignore", "response"]
    assert requests[0].args == {"path": "a.md", "size": 3}
    assert requests[0].description == "Write"


def test_middleware_batch_with_only_approve_allows_only_accept():
    value = {
        "action_requests": [{"name": "x", "args": {}}],
        "review_configs": [{"action_name": "x", "allowed_decisions": ["approve"]}],
    }
    _, [request] = requests_for(value)
    assert request.allowed_types == ["accept"]


def test_tool_approval_reads_allowed_decisions_from_the_response_schema():
    kind, [request] = requests_for(TOOL_APPROVAL, tool_approval_schema(["approve", "reject"]))
    assert kind == contract.KIND_TOOL_APPROVAL
    assert request.action == "send"
    assert request.args == {"to": "bob", "copies": 1}
    assert sorted(request.allowed_types) == ["accept", "ignore", "response"]
    assert request.extra["tool_call_id"] == "call_1"


def test_tool_approval_edits_are_checked_against_the_tools_own_schema():
    _, [request] = requests_for(TOOL_APPROVAL, tool_approval_schema(["approve", "edit"]))
    assert request.args_schema["required"] == ["to", "copies"]
    assert check_response(request, "edit", {"args": {"to": "al", "copies": 2}})["args"] == {
        "to": "al",
        "copies": 2,
    }
    with pytest.raises(ContractError, match="'copies' is a required property"):
        check_response(request, "edit", {"args": {"to": "al"}})
    with pytest.raises(ContractError, match="schema at copies: 'x' is not of type 'integer'"):
        check_response(request, "edit", {"args": {"to": "al", "copies": "x"}})


def test_tool_approval_without_edit_has_no_args_schema():
    _, [request] = requests_for(TOOL_APPROVAL, tool_approval_schema(["approve", "reject"]))
    assert request.args_schema is None


def test_a_tool_argument_named_type_does_not_add_decisions():
    from langchain.agents.middleware.human_in_the_loop import _decision_schema
    from langchain_core.tools import tool

    @tool
    def label(type: Literal["reject", "respond"], name: str) -> str:
        """Label something."""
        return name

    schema = TypeAdapter(_decision_schema(["approve", "edit"], "label", label)).json_schema()
    value = {**TOOL_APPROVAL, "name": "label", "args": {"type": "reject", "name": "x"}}
    _, [request] = requests_for(value, schema)
    assert sorted(request.allowed_types) == ["accept", "edit"]
    assert contract.decisions_in_schema(schema) == ["approve", "edit"]
    assert request.args_schema["properties"]["type"]["enum"] == ["reject", "respond"]


def test_tool_approval_with_a_single_decision_schema():
    _, [request] = requests_for(TOOL_APPROVAL, tool_approval_schema(["approve"]))
    assert request.allowed_types == ["accept"]


def test_tool_approval_without_schema_allows_every_decision():
    _, [request] = requests_for(TOOL_APPROVAL)
    assert sorted(request.allowed_types) == ["accept", "edit", "ignore", "response"]


@pytest.mark.parametrize("value", ["Which quarter?", {"q": 1}, [1, 2], 7, None])
def test_raw_value_can_be_answered_with_text_or_ignored(value):
    kind, [request] = requests_for(value)
    assert kind == contract.KIND_RAW
    assert sorted(request.allowed_types) == ["ignore", "response"]
    assert request.description == (value if isinstance(value, str) else "")


# --- check_response -------------------------------------------------------------------


@pytest.fixture
def request_():
    return requests_for(human_interrupt())[1][0]


def test_accept_and_ignore_carry_no_args(request_):
    assert check_response(request_, "accept", {"ignored": True}) is None
    assert check_response(request_, "ignore", "whatever") is None


def test_response_needs_text(request_):
    assert check_response(request_, "response", "Not now") == "Not now"
    for bad in ("", "   ", None, 5, {"text": "x"}):
        with pytest.raises(ContractError, match="non-empty text"):
            check_response(request_, "response", bad)


def test_unknown_decision_type_is_refused(request_):
    with pytest.raises(ContractError, match="Unknown decision type 'approve'"):
        check_response(request_, "approve", None)


@pytest.mark.parametrize(
    ("flag", "response_type", "args"),
    [
        ("allow_accept", "accept", None),
        ("allow_ignore", "ignore", None),
        ("allow_respond", "response", "text"),
        ("allow_edit", "edit", {"args": {"to": "b@example.com"}}),
    ],
)
def test_a_type_the_config_forbids_is_refused(flag, response_type, args):
    _, [request] = requests_for(human_interrupt(**{flag: False}))
    with pytest.raises(ContractError, match=f"does not allow '{response_type}'"):
        check_response(request, response_type, args)


def test_edit_keeps_json_types(request_):
    edited = {"to": "b@example.com", "copies": 3, "ratio": 1, "urgent": True}
    result = check_response(request_, "edit", {"action": "send_email", "args": edited})
    assert result == {"action": "send_email", "args": edited}
    assert type(result["args"]["copies"]) is int
    assert type(result["args"]["ratio"]) is int  # an int where a float was proposed is a number
    assert result["args"]["urgent"] is True


def test_edit_given_as_a_json_string_is_parsed_with_types_kept(request_):
    result = check_response(request_, "edit", '{"args": {"to": "c@example.com", "copies": 4}}')
    assert result == {"action": "send_email", "args": {"to": "c@example.com", "copies": 4}}
    assert type(result["args"]["copies"]) is int


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"args": {"copies": "3"}}, "'copies' must stay a number, got a string"),
        ({"args": {"urgent": 1}}, "'urgent' must stay a boolean, got a number"),
        ({"args": {"copies": True}}, "'copies' must stay a number, got a boolean"),
        ({"args": {"cc": "x"}}, "Unknown argument 'cc'"),
        ({"action": "delete_all", "args": {}}, "cannot change the action"),
        ({"args": "to=b"}, "needs 'args' as a JSON object"),
        ({"to": "b@example.com"}, "needs 'args' as a JSON object"),
        (["to"], "must be an object"),
        (None, "must be an object"),
        ('{"args": {"to": ', "not valid JSON"),
        ("not json at all", "not valid JSON"),
    ],
)
def test_bad_edits_are_refused_with_a_reason(request_, args, message):
    with pytest.raises(ContractError, match=message):
        check_response(request_, "edit", args)


def test_edit_is_validated_against_the_args_schema():
    value = human_interrupt()
    value["args_schema"] = {
        "type": "object",
        "properties": {"to": {"type": "string"}, "copies": {"type": "integer", "maximum": 10}},
        "required": ["to"],
        "additionalProperties": False,
    }
    _, [request] = requests_for(value)
    ok = check_response(request, "edit", {"args": {"to": "x", "copies": 10}})
    assert ok["args"] == {"to": "x", "copies": 10}
    with pytest.raises(ContractError, match="schema at copies: 11 is greater than the maximum"):
        check_response(request, "edit", {"args": {"to": "x", "copies": 11}})
    with pytest.raises(ContractError, match="schema at copies: 2.5 is not of type 'integer'"):
        check_response(request, "edit", {"args": {"to": "x", "copies": 2.5}})
    with pytest.raises(ContractError, match="'to' is a required property"):
        check_response(request, "edit", {"args": {"copies": 1}})
    with pytest.raises(ContractError, match="Additional properties"):
        check_response(request, "edit", {"args": {"to": "x", "bcc": "y"}})


def test_check_response_does_not_mutate_its_input(request_):
    edit = {"args": {"to": "b@example.com", "copies": 3}}
    before = copy.deepcopy(edit)
    check_response(request_, "edit", edit)
    assert edit == before


# --- resume_value ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response_type", "args", "expected"),
    [
        ("accept", None, {"type": "accept", "args": None}),
        ("ignore", None, {"type": "ignore", "args": None}),
        ("response", "Use Q3", {"type": "response", "args": "Use Q3"}),
        (
            "edit",
            {"args": {"to": "z@example.com", "copies": 5}},
            {
                "type": "edit",
                "args": {"action": "send_email", "args": {"to": "z@example.com", "copies": 5}},
            },
        ),
    ],
)
def test_a_dict_is_answered_with_a_dict(response_type, args, expected):
    assert answer(human_interrupt(), None, (response_type, args)) == expected


def test_a_list_is_answered_with_a_list_in_order():
    value = [human_interrupt(), human_interrupt()]
    kind, requests = requests_for(value)
    # Answers may arrive in any order; the list keeps the graph's order.
    answers = [(requests[1], "ignore", None), (requests[0], "response", "no")]
    assert resume_value(kind, value, answers) == [
        {"type": "response", "args": "no"},
        {"type": "ignore", "args": None},
    ]


def test_middleware_batch_is_answered_with_decisions():
    resumed = answer(
        HITL_REQUEST,
        None,
        ("edit", {"args": {"path": "b.md", "size": 7}}),
        ("response", "ran it myself"),
    )
    assert resumed == {
        "decisions": [
            {
                "type": "edit",
                "edited_action": {"name": "write_file", "args": {"path": "b.md", "size": 7}},
            },
            {"type": "respond", "message": "ran it myself"},
        ]
    }
    assert type(resumed["decisions"][0]["edited_action"]["args"]["size"]) is int


def test_middleware_text_without_respond_becomes_a_reject_with_message():
    resumed = answer(HITL_REQUEST, None, ("response", "wrong file"), ("accept", None))
    assert resumed == {
        "decisions": [{"type": "reject", "message": "wrong file"}, {"type": "approve"}]
    }
    resumed = answer(HITL_REQUEST, None, ("ignore", None), ("ignore", None))
    assert resumed == {"decisions": [{"type": "reject"}, {"type": "reject"}]}


def test_a_middleware_rejection_keeps_its_reason_even_where_respond_is_allowed():
    # run_shell allows respond too: the reason still goes back as a reject, not a respond.
    _, requests = requests_for(HITL_REQUEST)
    assert check_response(requests[1], "ignore", "not here") == "not here"
    assert check_response(requests[1], "ignore", "  ") is None
    resumed = answer(HITL_REQUEST, None, ("accept", None), ("ignore", "not here"))
    assert resumed == {
        "decisions": [{"type": "approve"}, {"type": "reject", "message": "not here"}]
    }


def test_tool_approval_is_answered_with_one_decision_matching_its_schema():
    schema = tool_approval_schema(["approve", "edit", "reject"])
    cases = [
        (("accept", None), {"type": "approve"}),
        (("ignore", None), {"type": "reject"}),
        (("response", "no"), {"type": "reject", "message": "no"}),
        (
            ("edit", {"args": {"to": "al", "copies": 2}}),
            {"type": "edit", "edited_action": {"name": "send", "args": {"to": "al", "copies": 2}}},
        ),
    ]
    for response, expected in cases:
        resumed = answer(TOOL_APPROVAL, schema, response)
        assert resumed == expected
        contract.check_resume_schema(schema, resumed)


def test_tool_approval_respond_decision_when_allowed():
    schema = tool_approval_schema(["approve", "respond"])
    resumed = answer(TOOL_APPROVAL, schema, ("response", "It is sent."))
    assert resumed == {"type": "respond", "message": "It is sent."}
    contract.check_resume_schema(schema, resumed)


def test_resume_schema_errors_name_the_place():
    schema = tool_approval_schema(["approve", "edit"])
    bad = {"type": "edit", "edited_action": {"name": "send", "args": {"to": "al"}}}
    with pytest.raises(ContractError, match="does not accept this answer"):
        contract.check_resume_schema(schema, bad)
    contract.check_resume_schema(None, {"anything": 1})  # no schema: nothing to check


@pytest.mark.parametrize("value", ["Which quarter?", {"q": 1}, [1, "x"]])
def test_raw_is_answered_with_text_or_none(value):
    assert answer(value, None, ("response", "Q3")) == "Q3"
    assert answer(value, None, ("ignore", None)) is None
