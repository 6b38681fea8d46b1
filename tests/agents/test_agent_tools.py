"""Each built-in tool on its own (no graph, no Django): results and bad input."""

from __future__ import annotations

import json

import pytest
from agent_helpers import image_bytes, invoke_tool
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command

from agents import contract
from agents.paths import LocalThreadFiles
from agents.tools import (
    approval_policy,
    approval_request,
    list_files,
    make_finish_tool,
    make_route_tool,
    make_view_image,
    present_files,
    read_file,
    require_approval,
    view_image,
    write_file,
)
from agents.tools.base import read_human_response
from agents.tools.clarification import answer_text, clarification_request
from agents.tools.files import is_transient, transient_image_message

pytestmark = pytest.mark.filterwarnings("error")


@pytest.fixture
def files(tmp_path):
    store = LocalThreadFiles(tmp_path / "media", "t1")
    store.write_bytes("/mnt/user-data/outputs/report.csv", b"a,b\n1,2\n")
    store.write_bytes("/mnt/user-data/outputs/chart.png", image_bytes("PNG"))
    store.write_bytes("/mnt/user-data/uploads/notes.txt", "hello ü".encode())
    return store


def error_text(result) -> str:
    assert isinstance(result, ToolMessage) and result.status == "error", result
    return result.text


# --- present_files ------------------------------------------------------------------


def test_present_files_updates_artifacts_in_order_without_duplicates(files):
    result = invoke_tool(
        present_files,
        files,
        filepaths=[
            "/mnt/user-data/outputs/report.csv",
            "/mnt/user-data/outputs/chart.png",
            "/mnt/user-data/outputs/report.csv",
        ],
    )
    assert isinstance(result, Command)
    assert result.update["artifacts"] == [
        "/mnt/user-data/outputs/report.csv",
        "/mnt/user-data/outputs/chart.png",
    ]
    message = result.update["messages"][0]
    assert message.tool_call_id == "call_1" and "report.csv, chart.png" in message.text


def test_present_files_accepts_paths_as_a_json_string(files):
    result = invoke_tool(present_files, files, filepaths='["/mnt/user-data/outputs/chart.png"]')
    assert result.update["artifacts"] == ["/mnt/user-data/outputs/chart.png"]


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        (["/mnt/user-data/uploads/notes.txt"], "Only files under /mnt/user-data/outputs"),
        (["/mnt/user-data/workspace/x.csv"], "Only files under /mnt/user-data/outputs"),
        (["outputs/report.csv"], "Relative paths"),
        (["/mnt/user-data/outputs/../uploads/notes.txt"], "'..'"),
        (["/mnt/user-data/outputs/missing.csv"], "does not exist"),
        (["/mnt/user-data/outputs"], "Only files under"),
        ([], "empty"),
        ("not json", "list of strings"),
    ],
)
def test_present_files_refuses_bad_paths_and_presents_nothing(files, paths, message):
    result = invoke_tool(
        present_files,
        files,
        filepaths=[*paths, "/mnt/user-data/outputs/report.csv"]
        if isinstance(paths, list) and paths
        else paths,
    )
    assert message in error_text(result)


def test_present_files_refuses_a_directory(files):
    files.write_bytes("/mnt/user-data/outputs/sub/a.txt", b"x")
    result = invoke_tool(present_files, files, filepaths=["/mnt/user-data/outputs/sub"])
    assert "is a directory" in error_text(result)


# --- view_image ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fmt", "mime"),
    [
        ("a.png", "PNG", "image/png"),
        ("a.jpg", "JPEG", "image/jpeg"),
        ("a.jpeg", "JPEG", "image/jpeg"),
        ("a.webp", "WEBP", "image/webp"),
    ],
)
def test_view_image_keeps_only_a_reference_in_state(files, name, fmt, mime):
    data = image_bytes(fmt)
    files.write_bytes(f"/mnt/user-data/workspace/{name}", data)
    result = invoke_tool(view_image, files, image_path=f"/mnt/user-data/workspace/{name}")
    ref = {"mime_type": mime, "size": len(data), "path": f"/mnt/user-data/workspace/{name}"}
    assert result.update["viewed_images"] == {ref["path"]: ref}
    assert result.update["messages"][0].artifact == ref
    assert "base64" not in json.dumps(result.update, default=str)


@pytest.mark.parametrize(
    ("path", "content", "message"),
    [
        ("/mnt/user-data/uploads/notes.txt", None, "not a supported image"),
        ("/mnt/user-data/workspace/a.gif", b"GIF89a", "not a supported image"),
        ("/mnt/user-data/workspace/fake.png", b"this is text, not a png", "does not contain PNG"),
        ("/mnt/user-data/workspace/jpeg.png", "JPEG", "does not contain PNG"),
        ("/mnt/user-data/workspace/png.webp", "PNG", "does not contain WEBP"),
        ("/mnt/user-data/workspace/truncated.png", "TRUNCATED", "does not contain PNG"),
        ("/mnt/user-data/workspace/missing.png", None, "does not exist"),
        ("workspace/a.png", None, "Relative paths"),
        ("/mnt/user-data/workspace/../../../etc/a.png", None, "'..'"),
        ("/tmp/a.png", None, "outside this thread"),
    ],
)
def test_view_image_refuses_bad_input(files, path, content, message):
    if content == "TRUNCATED":
        content = image_bytes("PNG", (64, 64))[:40]
    elif isinstance(content, str):
        content = image_bytes(content)
    if content is not None:
        files.write_bytes(path, content)
    assert message in error_text(invoke_tool(view_image, files, image_path=path))


def test_view_image_refuses_a_directory(files):
    files.write_bytes("/mnt/user-data/workspace/img.png/inner.txt", b"x")
    result = invoke_tool(view_image, files, image_path="/mnt/user-data/workspace/img.png")
    assert "is a directory" in error_text(result)


def test_view_image_refuses_an_oversized_image(files):
    data = image_bytes("PNG", (300, 300))
    files.write_bytes("/mnt/user-data/workspace/big.png", data)
    small = make_view_image(max_bytes=len(data) - 1)
    result = invoke_tool(small, files, image_path="/mnt/user-data/workspace/big.png")
    assert f"{len(data)} bytes; images may be at most {len(data) - 1}" in error_text(result)


def test_the_viewed_image_reaches_the_model_only_in_a_transient_message(files):
    ref = {"mime_type": "image/png", "size": 1, "path": "/mnt/user-data/outputs/chart.png"}
    history = [
        AIMessage(content="", tool_calls=[{"name": "view_image", "args": {}, "id": "c1"}]),
        ToolMessage(content="Loaded", name="view_image", tool_call_id="c1", artifact=ref),
    ]
    message = transient_image_message(files, history)
    image = message.content[1]
    assert image["type"] == "image" and image["mime_type"] == "image/png"
    assert image["base64"].startswith("iVBORw0KGgo")  # PNG signature, base64
    assert is_transient(message)
    # Once the model has answered, the image is not sent again.
    assert transient_image_message(files, [*history, AIMessage(content="ok")]) is None


# --- list / read / write ------------------------------------------------------------


def test_file_tools_list_read_and_write(files):
    assert invoke_tool(list_files, files).text.splitlines() == [
        "/mnt/user-data/uploads/",
        "/mnt/user-data/workspace/",
        "/mnt/user-data/outputs/",
    ]
    assert invoke_tool(read_file, files, path="/mnt/user-data/uploads/notes.txt").text == "hello ü"
    written = invoke_tool(write_file, files, path="/mnt/user-data/outputs/n.md", content="# hi")
    assert "Wrote 4 bytes" in written.text
    listing = invoke_tool(list_files, files, path="/mnt/user-data/outputs").text
    assert "/mnt/user-data/outputs/n.md" in listing.splitlines()


def test_file_tools_refuse_bad_input(files):
    files.write_bytes("/mnt/user-data/outputs/bin.dat", b"\xff\xfe\x00")
    assert "not UTF-8" in error_text(
        invoke_tool(read_file, files, path="/mnt/user-data/outputs/bin.dat")
    )
    assert "read-only" in error_text(
        invoke_tool(write_file, files, path="/mnt/user-data/uploads/x.txt", content="x")
    )
    assert "'..'" in error_text(
        invoke_tool(write_file, files, path="/mnt/user-data/outputs/../../x.txt", content="x")
    )
    assert "does not exist" in error_text(
        invoke_tool(list_files, files, path="/mnt/user-data/outputs/no")
    )
    assert not (files.root.parent / "x.txt").exists()


# --- ask_clarification pieces (the pause itself is tested in the graph tests) -------


def test_a_clarification_pauses_with_a_human_interrupt_the_contract_understands():
    value = clarification_request(
        question="Which quarter?",
        clarification_type="approach_choice",
        context="Sales *data*",
        options=["Q1", "Q2"],
        reviewer_group="finance",
        tool_call_id="c7",
    )
    kind, [request] = contract.requests_for(value)
    assert kind == contract.KIND_HUMAN_INTERRUPT
    assert request.action == "ask_clarification"
    assert request.allowed_types == ["response", "ignore"]
    assert request.reviewer_group == "finance"
    assert request.extra["clarification"]["options"] == ["Q1", "Q2"]
    assert "Sales \\*data\\*" in request.description  # model text is escaped


def test_a_risk_confirmation_offers_confirm_and_decline():
    value = clarification_request(
        question="Delete the old reports?",
        clarification_type="risk_confirmation",
        context=None,
        options=None,
    )
    assert value["config"]["allow_accept"] is True
    assert value["clarification"]["options"] == ["Confirm", "Decline"]
    assert answer_text("risk_confirmation", {"type": "accept", "args": None})[0].startswith(
        "Confirmed"
    )
    skipped, artifact = answer_text("risk_confirmation", {"type": "ignore", "args": None})
    assert "best judgment" in skipped and "do not take the risky step" in skipped
    assert artifact == {"answered": False}


def test_answers_come_back_as_text():
    assert answer_text("missing_info", {"type": "response", "args": "Berlin"}) == (
        "Berlin",
        {"answered": True, "answer": "Berlin"},
    )
    assert answer_text("missing_info", "Paris")[0] == "Paris"  # Command(resume="Paris")
    assert answer_text("missing_info", [{"type": "response", "args": "Rome"}])[0] == "Rome"
    assert read_human_response(None) == ("ignore", None)


# --- approval -----------------------------------------------------------------------


def _send(to: str, subject: str, copies: int = 1) -> str:
    """Send a message."""
    return f"sent to {to}"


def test_require_approval_marks_a_copy_and_builds_the_request():
    tool = require_approval(
        _send,
        config={"allow_respond": False},
        editable=["to"],
        description="Send to **{to}**: {subject} ({missing})",
        reviewer_group="finance",
    )
    assert approval_policy(tool).editable == ("to",)
    value = approval_request(
        tool,
        approval_policy(tool),
        {"name": "_send", "args": {"to": "a@x.io", "subject": "[x](http://evil)"}, "id": "c1"},
    )
    assert value["config"] == {
        "allow_accept": True,
        "allow_edit": True,
        "allow_respond": False,
        "allow_ignore": True,
    }
    assert value["description"] == "Send to **a@x.io**: \\[x\\]\\(http://evil\\) ({missing})"
    assert value["reviewer_group"] == "finance" and value["tool_call_id"] == "c1"
    schema = value["args_schema"]
    assert schema["properties"]["to"]["type"] == "string"
    assert schema["properties"]["subject"] == {"const": "[x](http://evil)"}
    assert schema["properties"]["copies"] is False  # not proposed, not editable
    _, [request] = contract.requests_for(value)
    assert request.args_schema == schema


def test_require_approval_refuses_unknown_editable_fields_and_no_decisions():
    with pytest.raises(ValueError, match="no argument"):
        require_approval(_send, editable=["cc"])
    with pytest.raises(ValueError, match="at least one"):
        require_approval(
            _send,
            config={
                "allow_accept": False,
                "allow_edit": False,
                "allow_respond": False,
                "allow_ignore": False,
            },
        )
    with pytest.raises(ValueError, match="Unknown approval config"):
        require_approval(_send, config={"allow_everything": True})


def test_edit_args_of_the_wrong_type_are_refused_by_the_contract():
    tool = require_approval(_send)
    value = approval_request(
        tool,
        approval_policy(tool),
        {"name": "_send", "args": {"to": "a@x.io", "subject": "s", "copies": 2}, "id": "c1"},
    )
    _, [request] = contract.requests_for(value)
    with pytest.raises(contract.ContractError, match="copies"):
        contract.check_response(
            request,
            "edit",
            {"action": "_send", "args": {"to": "a@x.io", "subject": "s", "copies": "two"}},
        )
    with pytest.raises(contract.ContractError, match="Additional properties"):
        contract.check_response(
            request, "edit", {"action": "_send", "args": {"to": "b", "subject": "s", "bcc": "x"}}
        )
    ok = contract.check_response(
        request, "edit", {"action": "_send", "args": {"to": "b@x.io", "subject": "s", "copies": 3}}
    )
    assert ok["args"]["copies"] == 3
    # A partial edit is fine: what is left out keeps its proposed value.
    partial = contract.check_response(request, "edit", {"action": "_send", "args": {"copies": 4}})
    assert partial["args"] == {"copies": 4}


# --- routing and completion ---------------------------------------------------------


def test_routing_accepts_only_allow_listed_groups(files):
    route = make_route_tool(["reviewers", "finance"])
    result = invoke_tool(route, files, group="finance", reason="money")
    assert result.update["reviewer_group"] == "finance"
    assert invoke_tool(route, files, group="default").update["reviewer_group"] is None
    text = error_text(invoke_tool(route, files, group="legal"))
    assert "Unknown reviewer group 'legal'" in text and "reviewers, finance, default" in text


def test_finish_stores_a_structured_final_result(files):
    from pydantic import BaseModel

    class Result(BaseModel):
        summary: str
        total: int

    result = invoke_tool(make_finish_tool(Result), files, summary="ok", total="3")
    assert result.update["final_result"] == {"summary": "ok", "total": 3}
    generic = invoke_tool(make_finish_tool(), files, summary="done", result={"n": 1})
    assert generic.update["final_result"] == {"summary": "done", "result": {"n": 1}}
