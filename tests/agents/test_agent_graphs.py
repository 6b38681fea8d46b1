"""The ReAct agent and the demo through interrupt and resume on real checkpointers.

Scripted models drive real tool calls; SQLite always, Postgres when the suite has it.
No Django in the code under test (the Postgres URL comes from the test database).
"""

from __future__ import annotations

import json
import uuid

import pytest
from agent_helpers import config_for, image_bytes, steps_model
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.types import Command
from pydantic import BaseModel

from agents.checkpoint import get_checkpointer
from agents.graphs.agent_v1 import build_agent_v1
from agents.graphs.demo import (
    DEFAULT_REQUEST,
    QUARTERS,
    RECIPIENT,
    build_demo_agent,
    parse_quarter,
)
from agents.models import ModelConfigError, ScriptedChatModel, get_model, model_label, reply
from agents.paths import LocalThreadFiles
from agents.react import InvalidAgentInput, build_react_agent
from agents.tools import require_approval

PNG_BASE64_PREFIX = "iVBORw0KGgo"


# django_db only makes pytest-django create the test database the Postgres saver uses.
@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.django_db]),
    ],
    scope="module",
)
def checkpointer(request, tmp_path_factory):
    if request.param == "sqlite":
        return get_checkpointer(f"sqlite:///{tmp_path_factory.mktemp('cp') / 'cp.sqlite3'}")
    return get_checkpointer(request.getfixturevalue("test_database_url"))


@pytest.fixture
def files(tmp_path):
    return LocalThreadFiles(tmp_path / "media", uuid.uuid4().hex)


def call(name: str, **args) -> tuple[str, dict]:
    return (name, args)


def pending(graph, config) -> list:
    return list(graph.get_state(config).interrupts)


def resume(graph, config, answer) -> None:
    [interrupt] = pending(graph, config)
    graph.invoke(Command(resume={interrupt.id: answer}), config)


def tool_messages(graph, config, name: str) -> list[ToolMessage]:
    messages = graph.get_state(config).values["messages"]
    return [m for m in messages if isinstance(m, ToolMessage) and m.name == name]


def checkpoint_dump(checkpointer, config) -> str:
    """Everything the checkpointer stores for the thread, as text."""
    parts = []
    for saved in checkpointer.list(
        {"configurable": {"thread_id": config["configurable"]["thread_id"]}}
    ):
        parts.append(repr(saved.checkpoint))
        parts.append(repr(saved.pending_writes))
    return "\n".join(parts)


# --- the demo -----------------------------------------------------------------------


def test_the_demo_runs_through_both_pauses(checkpointer, files):
    config = config_for(files)
    build_demo_agent(checkpointer=checkpointer).invoke(
        {"request": "Prepare and send the sales report"}, config
    )

    # A fresh graph object per step: nothing lives in memory between pauses.
    graph = build_demo_agent(checkpointer=checkpointer)
    [question] = pending(graph, config)
    assert question.value["action_request"]["action"] == "ask_clarification"
    assert question.value["clarification"]["type"] == "approach_choice"
    assert question.value["clarification"]["options"] == QUARTERS
    resume(graph, config, {"type": "response", "args": "The third quarter of 2024, please"})

    graph = build_demo_agent(checkpointer=checkpointer)
    [approval] = pending(graph, config)
    assert approval.value["action_request"]["action"] == "send_email"
    assert approval.value["action_request"]["args"]["subject"] == "Sales report Q3 2024"
    assert approval.value["config"]["allow_edit"] is True
    state = graph.get_state(config).values
    csv_path = "/mnt/user-data/outputs/sales-q3-2024.csv"
    png_path = "/mnt/user-data/outputs/sales-q3-2024-chart.png"
    assert state["artifacts"] == [csv_path, png_path]
    assert files.read_bytes(csv_path).startswith(b"month,region,units,revenue\r\n")
    assert files.read_bytes(png_path).startswith(b"\x89PNG")
    assert state["viewed_images"][png_path]["mime_type"] == "image/png"

    edited = {
        **approval.value["action_request"]["args"],
        "to": "cfo@example.com",
        "subject": "Q3 numbers",
    }
    resume(graph, config, {"type": "edit", "args": {"action": "send_email", "args": edited}})

    state = build_demo_agent(checkpointer=checkpointer).get_state(config)
    assert state.next == () and not state.interrupts
    result = state.values["final_result"]
    assert result["email_sent"] is True
    assert (result["recipient"], result["subject"], result["quarter"]) == (
        "cfo@example.com",
        "Q3 numbers",
        "Q3 2024",
    )
    assert result["files"] == [csv_path, png_path]
    outbox = files.read_bytes("/mnt/user-data/workspace/outbox/q3-numbers.eml").decode()
    assert "To: cfo@example.com" in outbox and "sales-q3-2024-chart.png" in outbox
    # The chart was shown to the model, but no pixels were ever checkpointed.
    dump = checkpoint_dump(checkpointer, config)
    assert png_path in dump and PNG_BASE64_PREFIX not in dump and "'base64'" not in dump


@pytest.mark.parametrize(
    ("answer", "sent", "note"),
    [
        ({"type": "response", "args": "Hold it until Monday."}, False, "Hold it until Monday."),
        ({"type": "ignore", "args": None}, False, None),
        ({"type": "accept", "args": None}, True, None),
    ],
)
def test_the_demo_finishes_honestly_whatever_the_reviewer_decides(
    checkpointer, files, answer, sent, note
):
    config = config_for(files)
    graph = build_demo_agent(checkpointer=checkpointer)
    graph.invoke({}, config)  # no input: the demo's default request
    resume(graph, config, {"type": "ignore", "args": None})  # no quarter: the latest one
    resume(graph, config, answer)
    result = graph.get_state(config).values["final_result"]
    assert result["quarter"] == QUARTERS[-1]
    assert result["email_sent"] is sent and result["reviewer_note"] == note
    assert files.exists("/mnt/user-data/workspace/outbox/sales-report-q4-2025.eml") is sent


def test_quarters_are_read_from_free_text():
    assert parse_quarter("Q2", "Q4 2025") == "Q2 2025"
    assert parse_quarter("the first quarter of 2024", "Q4 2025") == "Q1 2024"
    assert parse_quarter("whatever you think", "Q4 2025") is None


# --- ask_clarification through a graph ----------------------------------------------


def test_a_clarification_pauses_and_its_answer_is_the_tool_result(checkpointer, files):
    seen: list = []
    model = steps_model(
        reply(
            "",
            call(
                "ask_clarification",
                question="Which city?",
                clarification_type="missing_info",
                options='["Berlin", "Paris"]',
            ),
        ),
        reply("Berlin it is."),
        seen=seen,
    )
    graph = build_react_agent(model, checkpointer=checkpointer)
    config = config_for(files)
    graph.invoke({"request": "Book a trip"}, config)
    [interrupt] = pending(graph, config)
    assert interrupt.value["action_request"]["args"]["options"] == ["Berlin", "Paris"]
    assert interrupt.value["config"] == {
        "allow_accept": False,
        "allow_edit": False,
        "allow_respond": True,
        "allow_ignore": True,
    }
    resume(graph, config, {"type": "response", "args": "Berlin"})
    [answer] = tool_messages(graph, config, "ask_clarification")
    assert answer.text == "Berlin" and answer.status == "success"
    # Resumed, not re-run: one call before the pause, one after it.
    assert len(seen) == 2 and isinstance(seen[1][-1], ToolMessage)
    messages = graph.get_state(config).values["messages"]
    assert [type(m).__name__ for m in messages] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]


def test_an_unknown_clarification_type_is_a_tool_error_the_model_can_fix(checkpointer, files):
    model = steps_model(
        reply(
            "", call("ask_clarification", question="Which?", clarification_type="urgent_question")
        ),
        reply(
            "", call("ask_clarification", question="Which?", clarification_type="approach_choice")
        ),
        reply(
            "",
            call(
                "ask_clarification",
                question="Which?",
                clarification_type="approach_choice",
                options=["A", "B"],
            ),
        ),
    )
    graph = build_react_agent(model, checkpointer=checkpointer)
    config = config_for(files)
    graph.invoke({"request": "Pick"}, config)
    first, second = tool_messages(graph, config, "ask_clarification")
    assert first.status == "error" and "Unknown clarification_type 'urgent_question'" in first.text
    assert "missing_info" in first.text
    assert second.status == "error" and "needs `options`" in second.text
    [interrupt] = pending(graph, config)
    assert interrupt.value["clarification"]["options"] == ["A", "B"]


def test_options_that_are_not_a_list_are_refused(checkpointer, files):
    model = steps_model(
        reply(
            "",
            call(
                "ask_clarification",
                question="Q?",
                clarification_type="suggestion",
                options="yes or no",
            ),
        )
    )
    graph = build_react_agent(model, checkpointer=checkpointer)
    config = config_for(files)
    graph.invoke({"request": "x"}, config)
    [message] = tool_messages(graph, config, "ask_clarification")
    assert message.status == "error" and "list of strings" in message.text
    assert not pending(graph, config)


# --- tool approval ------------------------------------------------------------------


def _transfer_tool(ran: list):
    def transfer(amount: int, to: str) -> str:
        """Transfer money."""
        ran.append({"amount": amount, "to": to})
        return f"transferred {amount} to {to}"

    return require_approval(transfer, description="Transfer **{amount}** to {to}?")


@pytest.mark.parametrize(
    ("answer", "runs", "result"),
    [
        ({"type": "accept", "args": None}, [{"amount": 5, "to": "bob"}], "transferred 5 to bob"),
        (
            {"type": "edit", "args": {"action": "transfer", "args": {"amount": 7, "to": "eve"}}},
            [{"amount": 7, "to": "eve"}],
            "transferred 7 to eve",
        ),
        (
            {"type": "edit", "args": {"action": "transfer", "args": {"amount": 9}}},
            [{"amount": 9, "to": "bob"}],
            "transferred 9 to bob",
        ),
        ({"type": "response", "args": "Use the other account."}, [], "Use the other account."),
        (
            {"type": "ignore", "args": None},
            [],
            "The reviewer skipped this call: transfer was not run.",
        ),
        (
            {
                "type": "edit",
                "args": {"action": "transfer", "args": {"amount": "seven", "to": "eve"}},
            },
            [],
            "The reviewer's edit does not fit transfer (amount: 'seven' is not of type 'integer')",
        ),
    ],
)
def test_an_approval_tool_acts_on_each_decision(checkpointer, files, answer, runs, result):
    ran: list = []
    graph = build_react_agent(
        steps_model(reply("", call("transfer", amount=5, to="bob"))),
        [_transfer_tool(ran)],
        checkpointer=checkpointer,
    )
    config = config_for(files)
    graph.invoke({"request": "pay bob"}, config)
    [interrupt] = pending(graph, config)
    assert interrupt.value["description"] == "Transfer **5** to bob?"
    assert interrupt.value["args_schema"]["properties"]["amount"]["type"] == "integer"
    assert ran == []  # nothing runs before the decision
    resume(graph, config, answer)
    [message] = tool_messages(graph, config, "transfer")
    assert ran == runs
    assert message.text.startswith(result)


def test_a_malformed_call_goes_back_to_the_model_before_any_reviewer_sees_it(checkpointer, files):
    ran: list = []
    model = steps_model(reply("", call("transfer", amount="lots", to="bob")))
    graph = build_react_agent(model, [_transfer_tool(ran)], checkpointer=checkpointer)
    config = config_for(files)
    graph.invoke({"request": "pay bob"}, config)
    assert not pending(graph, config) and ran == []
    [message] = tool_messages(graph, config, "transfer")
    assert message.status == "error" and message.text.startswith(
        "Invalid arguments for transfer (amount:"
    )


def test_parallel_approvals_pause_together_and_resume_together(checkpointer, files):
    ran: list = []
    model = steps_model(
        reply("", call("transfer", amount=1, to="a"), call("transfer", amount=2, to="b"))
    )
    graph = build_react_agent(model, [_transfer_tool(ran)], checkpointer=checkpointer)
    config = config_for(files)
    graph.invoke({"request": "pay both"}, config)
    interrupts = pending(graph, config)
    assert sorted(i.value["action_request"]["args"]["to"] for i in interrupts) == ["a", "b"]
    answers = {
        i.id: {"type": "accept"}
        if i.value["action_request"]["args"]["to"] == "a"
        else {"type": "ignore"}
        for i in interrupts
    }
    graph.invoke(Command(resume=answers), config)
    assert ran == [{"amount": 1, "to": "a"}]
    assert not pending(graph, config)
    assert len(tool_messages(graph, config, "transfer")) == 2


# --- routing and completion ---------------------------------------------------------


def test_the_agent_routes_its_interrupts_to_an_allow_listed_group(checkpointer, files):
    model = steps_model(
        reply("", call("route_to_reviewers", group="legal")),
        reply("", call("route_to_reviewers", group="finance", reason="budget")),
        reply("", call("ask_clarification", question="Budget?", clarification_type="missing_info")),
    )
    graph = build_react_agent(
        model, reviewer_groups=["reviewers", "finance"], checkpointer=checkpointer
    )
    config = config_for(files)
    graph.invoke({"request": "plan"}, config)
    refused, accepted = tool_messages(graph, config, "route_to_reviewers")
    assert (
        refused.status == "error" and "choose one of: reviewers, finance, default" in refused.text
    )
    assert accepted.status == "success"
    [interrupt] = pending(graph, config)
    assert interrupt.value["reviewer_group"] == "finance"


class Answer(BaseModel):
    summary: str
    score: int


def test_finish_ends_the_run_with_a_structured_result(checkpointer, files):
    seen: list = []
    model = steps_model(
        reply("", call("finish", summary="half", score="lots")),
        reply("", call("finish", summary="done", score=3)),
        reply("never called"),
        seen=seen,
    )
    graph = build_react_agent(model, response_format=Answer, checkpointer=checkpointer)
    config = config_for(files)
    graph.invoke({"request": "rate it"}, config)
    state = graph.get_state(config).values
    assert state["final_result"] == {"summary": "done", "score": 3}
    first, _ = tool_messages(graph, config, "finish")
    assert first.status == "error" and "score" in first.text
    assert len(seen) == 2  # the run ended right after finish
    # A new request starts a new task: the old result is cleared.
    graph.invoke({"request": "again"}, config)
    assert graph.get_state(config).values["final_result"] is None


# --- agent shape ----------------------------------------------------------------------


def test_prompt_and_hooks_shape_what_the_model_sees(checkpointer, files):
    seen: list = []
    post_calls: list = []

    def pre(state):
        return {"llm_input_messages": state["messages"][-1:]}

    def post(state):
        post_calls.append(state["messages"][-1].text)
        return {}

    model = steps_model(reply("", call("list_files")), reply("all done"), seen=seen)
    graph = build_react_agent(
        model,
        prompt="You are careful.",
        pre_model_hook=pre,
        post_model_hook=post,
        checkpointer=checkpointer,
    )
    config = config_for(files)
    graph.invoke(
        {"messages": [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]},
        config,
    )
    assert [type(m) for m in seen[0]] == [SystemMessage, HumanMessage]
    assert seen[0][1].text == "two" and seen[0][0].text == "You are careful."
    assert isinstance(seen[1][1], ToolMessage)
    assert post_calls == ["", "all done"]
    assert graph.get_state(config).values["messages"][-1].text == "all done"


def test_the_model_sees_a_viewed_image_once_and_state_keeps_a_reference(checkpointer, files):
    seen: list = []
    files.write_bytes("/mnt/user-data/uploads/photo.jpg", image_bytes("JPEG"))
    model = steps_model(
        reply("", call("view_image", image_path="/mnt/user-data/uploads/photo.jpg")),
        reply("nice"),
        seen=seen,
    )
    graph = build_react_agent(model, checkpointer=checkpointer)
    config = config_for(files)
    graph.invoke({"request": "look"}, config)
    image_message = seen[1][-1]
    assert isinstance(image_message, HumanMessage)
    assert image_message.content[1]["mime_type"] == "image/jpeg"
    state = graph.get_state(config).values
    assert state["viewed_images"]["/mnt/user-data/uploads/photo.jpg"]["mime_type"] == "image/jpeg"
    assert "base64" not in json.dumps([m.model_dump() for m in state["messages"]])
    assert "/9j/" not in checkpoint_dump(checkpointer, config)  # JPEG base64 prefix


def test_the_agent_needs_some_input(checkpointer, files):
    graph = build_react_agent(steps_model(), checkpointer=checkpointer)
    with pytest.raises(InvalidAgentInput, match="request"):
        graph.invoke({}, config_for(files))


def test_tool_names_must_be_unique():
    def finish(x: int) -> str:
        """Clash."""
        return ""

    with pytest.raises(ValueError, match="duplicated: finish"):
        build_react_agent(steps_model(), [finish])


# --- model factory ------------------------------------------------------------------


def test_the_default_model_is_the_scripted_demo_model(monkeypatch):
    monkeypatch.delenv("HITL_MODEL", raising=False)
    model = get_model()
    assert isinstance(model, ScriptedChatModel)
    assert model_label(model) == "scripted demo model"
    message = model.bind_tools([]).invoke([HumanMessage(content="hi")])
    assert (
        isinstance(message, AIMessage)
        and message.response_metadata["model_name"] == "scripted demo model"
    )
    monkeypatch.setenv("HITL_MODEL", "scripted")
    assert isinstance(get_model(), ScriptedChatModel)


def test_model_specs_are_checked():
    with pytest.raises(ModelConfigError, match="provider:model"):
        get_model("gpt-4o")
    with pytest.raises(ModelConfigError, match=r"pip install 'hitl\[groq\]'"):
        get_model("groq:llama-3.3-70b")


def test_demo_v1_pauses_in_langchains_own_format(checkpointer, files):
    config = config_for(files)
    graph = build_agent_v1(checkpointer=checkpointer)
    graph.invoke({"messages": [HumanMessage("Send the report")]}, config)
    [pause] = pending(graph, config)
    [request] = pause.value["action_requests"]
    # LangChain's stock middleware: `args` only. HITL's /langgraph adds `arguments` for
    # the released Agent Inbox where that inbox reads (tests/api/test_inbox_demo_v1.py).
    assert request["name"] == "send_email" and request["args"]["to"] == RECIPIENT
    assert set(request) == {"name", "args", "description"}
    resume(
        graph,
        config,
        {
            "decisions": [
                {
                    "type": "edit",
                    "edited_action": {
                        "name": "send_email",
                        "args": {**request["args"], "to": "cfo@example.com"},
                    },
                }
            ]
        },
    )
    assert "cfo@example.com" in graph.get_state(config).values["messages"][-1].content


def test_demo_v1_starts_with_no_message_as_demo_does(checkpointer, files):
    config = config_for(files)
    graph = build_agent_v1(checkpointer=checkpointer)
    graph.invoke({}, config)
    [pause] = pending(graph, config)
    assert pause.value["action_requests"][0]["name"] == "send_email"
    first = graph.get_state(config).values["messages"][0]
    assert isinstance(first, HumanMessage) and first.content == DEFAULT_REQUEST
