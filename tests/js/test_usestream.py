"""Chat UIs built on the JS SDK's React `useStream` hook work unchanged against HITL.

A small page (tests/js/usestream/page.jsx) uses `useStream` as LangChain's Agent Chat UI
does and answers interrupts with what Agent Chat UI sends; real Chromium clicks it. Each
test checks the page and the database (HumanInterrupt rows, Run status, audit trail),
against the production layout (daphne + Celery + PostgreSQL + Redis) and the embedded
default (`make run`: SQLite, no Redis).
"""

from __future__ import annotations

import re
import uuid
from urllib.parse import urlencode, urlsplit

import httpx
import pytest

from tests.conftest import wait_for
from tests.js.usestream_graphs import HELD_AFTER, cancelled_marker, reply_to
from tests.review.test_browser import ARTIFACTS, chromium  # noqa: F401

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

TIMEOUT_MS = 30_000
END_NOTE = "The reviewer answered: {}."


class Chat:
    """The page in one browser tab, with what a test asks of it."""

    def __init__(self, context, hitl, origin: str, gate_dir, assistant: str = "gated_chat"):
        self.page = context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        self.errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.requests: list = []  # what the page sent to HITL, as Playwright saw it
        self.page.on(
            "request", lambda r: self.requests.append(r) if "/langgraph/" in r.url else None
        )
        self.hitl, self.origin, self.gate_dir, self.assistant = hitl, origin, gate_dir, assistant

    def open(self) -> Chat:
        query = {
            "apiUrl": f"{self.hitl.base_url}/langgraph",
            "assistantId": self.assistant,
            "apiKey": self.hitl.token,
        }
        self.page.goto(f"{self.origin}/index.html?{urlencode(query)}")
        return self

    def send(self, text: str) -> None:
        self.page.fill("#input", text)
        self.page.click("#submit")

    @property
    def thread_id(self) -> str:
        self.page.wait_for_selector("#chat:not([data-thread=''])")
        return self.page.get_attribute("#chat", "data-thread") or ""

    def messages(self) -> list[tuple[str, str, str]]:
        """(type, id, text) of each message the page shows, in order."""
        return [
            tuple(m)
            for m in self.page.eval_on_selector_all(
                ".message",
                "els => els.map(e => [e.dataset.type, e.dataset.id,"
                " e.querySelector('.text').textContent])",
            )
        ]

    def wait_for_text(self, text: str) -> None:
        self.page.wait_for_function(
            "t => [...document.querySelectorAll('.message .text')].some(e => e.textContent === t)",
            arg=text,
        )

    def wait_idle(self) -> None:
        self.page.wait_for_selector("#chat[data-loading=false]")

    def wait_for_interrupt(self, fmt: str = "human-interrupt", *, other_than: str = "") -> str:
        """The shown interrupt's id, once one (not `other_than`) shows and the run's
        stream has ended (the page shows it from the stream, before the run's end is
        recorded)."""
        self.page.wait_for_selector(f"#interrupt[data-format={fmt}]:not([data-id='{other_than}'])")
        self.wait_idle()
        return self.page.get_attribute("#interrupt", "data-id") or ""

    def sent(self, method: str, pattern: str) -> list[tuple[dict, dict | None]]:
        """(headers, JSON body) of each request to a /langgraph path matching `pattern`
        (as far as Playwright has reported them: it does so while the test calls it)."""
        return [
            (r.headers, r.post_data_json if r.post_data else None)
            for r in self.requests
            if r.method == method
            and re.search(pattern, urlsplit(r.url).path.split("/langgraph", 1)[1])
        ]

    def run_bodies(self) -> list[dict]:
        """The bodies of the runs the page started, in order."""
        return [body for _, body in self.sent("POST", r"^/threads/[^/]+/runs/stream$")]

    def open_gate(self, name: str) -> None:
        (self.gate_dir / name).touch()

    def state_messages(self) -> list[tuple[str, str, str]]:
        """(type, id, text) of the thread's messages as the server keeps them."""
        state = httpx.get(
            f"{self.hitl.base_url}/langgraph/threads/{self.thread_id}/state",
            headers={"x-api-key": self.hitl.token},
            timeout=30,
        )
        assert state.status_code == 200, state.text
        return [
            (m["type"], m["id"], _text(m["content"])) for m in state.json()["values"]["messages"]
        ]

    def assert_matches_the_thread(self) -> None:
        """Every message exactly once, in the server's order: nothing missing or repeated."""
        self.wait_idle()
        shown = self.messages()
        assert len({m[1] for m in shown}) == len(shown), shown
        assert shown == self.state_messages()
        assert not self.errors, self.errors
        assert self.page.get_attribute("#chat", "data-error") == ""  # useStream's error


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if block.get("type") == "text")


def held_prefix(request: str) -> str:
    """What the page shows of the reply while its run is held at the gate."""
    return "".join(re.findall(r"\S+\s*", reply_to(request))[:HELD_AFTER])


def shot(chat: Chat, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    chat.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest.fixture
def new_chat(chromium, hitl, page_server):  # noqa: F811
    """Open the page in a fresh browser context (its own sessionStorage)."""
    contexts = []

    def open_chat(assistant: str = "gated_chat") -> Chat:
        context = chromium.new_context(viewport={"width": 1000, "height": 800})
        contexts.append(context)
        return Chat(context, hitl, page_server.origin, page_server.gate_dir, assistant).open()

    yield open_chat
    for context in contexts:
        context.close()


def _gate() -> str:
    return uuid.uuid4().hex[:12]


def test_submit_streams_pauses_and_the_agent_chat_ui_resume_ends_the_run(new_chat, hitl):
    chat = new_chat()
    gate = _gate()
    request = f"hold:{gate} summarise the Q3 numbers"
    chat.send(request)
    # Tokens arrive while the model is still talking: the run is held mid-reply.
    chat.wait_for_text(held_prefix(request))
    thread_id = chat.thread_id
    assert hitl.runs(thread_id) == [("start", "running")]
    assert chat.page.is_visible("#stop")
    chat.open_gate(gate)

    chat.wait_for_interrupt()
    chat.wait_for_text(reply_to(request))
    assert chat.page.inner_text("#interrupt .action") == "send_reply"
    assert hitl.interrupts(thread_id) == [("pending", "")]
    assert hitl.runs(thread_id) == [("start", "interrupted")]
    chat.assert_matches_the_thread()
    shot(chat, f"usestream-{hitl.name}-1-paused")

    # Accept, as Agent Chat UI sends it: submit({}, {command: {resume: [response]}}).
    chat.page.click("#accept")
    chat.wait_for_text(END_NOTE.format("accept"))
    chat.wait_idle()
    assert not chat.page.is_visible("#interrupt")
    assert hitl.interrupts(thread_id) == [("resolved", "accept")]
    assert hitl.runs(thread_id) == [("start", "interrupted"), ("resume", "success")]
    start, resume = chat.run_bodies()
    assert start["input"]["messages"][0]["content"] == [{"type": "text", "text": request}]
    assert {"values", "messages-tuple"} <= set(start["stream_mode"])
    assert start["stream_resumable"] is True and start["on_disconnect"] == "continue"
    assert resume["input"] == {}
    assert resume["command"] == {"resume": [{"type": "accept", "args": None}]}
    assert all(h["x-api-key"] == hitl.token for h, _ in chat.sent("POST", "/runs/stream$"))
    answered = [kind for kind, _ in hitl.audit(thread_id) if kind == "interrupt.answered"]
    assert answered == ["interrupt.answered"]
    chat.assert_matches_the_thread()
    shot(chat, f"usestream-{hitl.name}-2-answered")


def test_a_response_in_the_list_format_reaches_the_graph(new_chat, hitl):
    chat = new_chat()
    chat.send("draft a reply")
    chat.wait_for_interrupt()
    chat.page.fill("#response-text", "say it shorter")
    chat.page.click("#respond")
    chat.wait_for_text(END_NOTE.format("response"))
    assert hitl.interrupts(chat.thread_id) == [("resolved", "response")]
    response = {"type": "response", "args": "say it shorter"}
    assert chat.run_bodies()[-1]["command"] == {"resume": [response]}
    chat.assert_matches_the_thread()


def test_stop_mid_run_cancels_it_and_no_interrupt_opens(new_chat, hitl):
    chat = new_chat()
    gate = _gate()
    request = f"hold:{gate} a long answer please"
    chat.send(request)
    chat.wait_for_text(held_prefix(request))
    thread_id = chat.thread_id

    [(run_id, _status)] = hitl.run_ids(thread_id)
    cancel = f"/langgraph/threads/{thread_id}/runs/{run_id}/cancel"
    # useStream's stop() cancels the run it started.
    with chat.page.expect_request(
        lambda r: r.method == "POST" and urlsplit(r.url).path.endswith(cancel)
    ):
        chat.page.click("#stop")
    wait_for(lambda: hitl.runs(thread_id) == [("start", "cancelled")], 30, 0.1, "the run cancelled")
    # The worker stopped the graph where it was, mid-reply.
    marker = cancelled_marker(chat.gate_dir / gate)
    wait_for(marker.exists, 30, 0.1, "the held run to be cancelled in the worker")
    chat.wait_idle()
    chat.open_gate(gate)  # were the run still going, it would now go on and pause

    # A second message on the thread runs to its own pause; the stopped run's reply
    # never reaches the thread.
    chat.send("second question")
    chat.wait_for_interrupt()
    assert hitl.interrupts(thread_id) == [("pending", "")]
    assert [status for _, status in hitl.runs(thread_id)] == ["cancelled", "interrupted"]
    kinds = [kind for kind, _ in hitl.audit(thread_id)]
    assert kinds.count("run.cancelled") == 1
    assert reply_to(request) not in [text for *_, text in chat.state_messages()]
    chat.assert_matches_the_thread()


def test_mark_as_resolved_sends_goto_end_and_withdraws_the_interrupt(new_chat, hitl):
    chat = new_chat()
    chat.send("anything to resolve?")
    first = chat.wait_for_interrupt()
    thread_id = chat.thread_id

    chat.page.click("#resolve")  # submit({}, {command: {goto: END}})
    # LangGraph runs the paused node again, which asks again: a new request.
    second = chat.wait_for_interrupt(other_than=first)
    assert second != first
    wait_for(
        lambda: hitl.interrupts(thread_id) == [("cancelled", ""), ("pending", "")],
        30,
        0.1,
        "the first interrupt withdrawn, the second open",
    )
    assert [kind for kind, _ in hitl.audit(thread_id)].count("interrupt.cancelled") == 1
    assert hitl.runs(thread_id)[-1][1] == "interrupted"
    resolve = chat.run_bodies()[-1]
    assert resolve["input"] == {} and resolve["command"] == {"goto": "__end__"}
    chat.assert_matches_the_thread()


def test_a_message_typed_while_paused_supersedes_the_interrupt(new_chat, hitl):
    chat = new_chat()
    chat.send("first question")
    first = chat.wait_for_interrupt()
    thread_id = chat.thread_id

    chat.send("never mind, second question")
    chat.wait_for_text(reply_to("never mind, second question"))
    chat.wait_for_interrupt(other_than=first)
    assert hitl.interrupts(thread_id) == [("cancelled", ""), ("pending", "")]
    reasons = [
        data.get("reason") for kind, data in hitl.audit(thread_id) if kind == "interrupt.cancelled"
    ]
    assert reasons == ["superseded by new input"]
    assert [status for _, status in hitl.runs(thread_id)] == ["interrupted", "interrupted"]
    chat.assert_matches_the_thread()


def _rejoin_mid_run(chat: Chat, hitl, *, restart: bool, reload: bool = True) -> None:
    gate = _gate()
    request = f"hold:{gate} tell me about reloads"
    chat.send(request)
    chat.wait_for_text(held_prefix(request))
    thread_id = chat.thread_id
    [(run_id, _status)] = hitl.run_ids(thread_id)
    if restart:
        hitl.restart()
    if reload:
        chat.page.reload()  # the thread id is in the URL: useStream rejoins the run
        chat.wait_for_text(held_prefix(request))
        # It rejoined from the start of the run's stream (not only its live tail); any
        # other join is the SDK's own reconnect, from the last event it had.
        joins = chat.sent("GET", f"^/threads/{thread_id}/runs/{run_id}/stream$")
        after = [h.get("last-event-id") for h, _ in joins]
        assert after.count("-1") == 1, after
        assert all(re.fullmatch(r"[\w#-]+", i or "") for i in after), after
        assert chat.page.get_attribute("#chat", "data-thread") == thread_id
    chat.open_gate(gate)
    chat.wait_for_interrupt()
    chat.wait_for_text(reply_to(request))
    assert hitl.runs(thread_id) == [("start", "interrupted")]
    chat.assert_matches_the_thread()


def test_a_reload_mid_run_rejoins_with_every_message_once(new_chat, hitl):
    _rejoin_mid_run(new_chat(), hitl, restart=False)


# The embedded default runs its graphs inside daphne: a restart ends them.
production_only = pytest.mark.parametrize("layout", ["production"], indirect=True)


@production_only
def test_a_reload_across_a_daphne_restart_rejoins_with_every_message_once(new_chat, hitl):
    _rejoin_mid_run(new_chat(), hitl, restart=True)


@production_only
def test_the_sdks_own_reconnect_across_a_daphne_restart_gets_every_message_once(new_chat, hitl):
    """No reload: the JS SDK reconnects by itself (Location, Last-Event-ID)."""
    _rejoin_mid_run(new_chat(), hitl, restart=True, reload=False)


def test_the_v1_middleware_agent_round_trips_through_decision_buttons(new_chat, hitl):
    chat = new_chat("demo_v1")
    chat.send("Send the Q4 report")
    chat.wait_for_interrupt("hitl-request")
    thread_id = chat.thread_id
    assert chat.page.inner_text("#interrupt .action") == "send_email"
    buttons = chat.page.eval_on_selector_all(
        "#interrupt button.decision", "els => els.map(e => e.dataset.decision)"
    )
    assert buttons == ["approve", "edit", "reject", "respond"]
    assert hitl.interrupts(thread_id) == [("pending", "")]
    shot(chat, f"usestream-{hitl.name}-3-v1-paused")

    chat.page.click("#interrupt button[data-decision=approve]")  # {decisions: [{type}]}
    chat.page.wait_for_function(
        "() => [...document.querySelectorAll('.message .text')]"
        ".some(e => e.textContent.startsWith('Sent the Q4 2025 sales report'))"
    )
    chat.wait_idle()
    assert hitl.interrupts(thread_id) == [("resolved", "accept")]
    assert [status for _, status in hitl.runs(thread_id)] == ["interrupted", "success"]
    assert chat.run_bodies()[-1]["command"] == {"resume": {"decisions": [{"type": "approve"}]}}
    chat.assert_matches_the_thread()
    shot(chat, f"usestream-{hitl.name}-4-v1-answered")
