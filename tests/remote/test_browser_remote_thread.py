"""A thread that runs on another deployment, in real Chromium: its meta line names the
reviewer group once, its steps have the graph's words (no "loop", "input" or __start__),
and its history offers no fork the page does not have."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from hitl.core.models import RemoteDeployment
from tests.conftest import decide
from tests.remote.conftest import PeerServer
from tests.remote.test_remote_review import mirrored
from tests.review import test_browser as base
from tests.review.screens import shots

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


@pytest.fixture(scope="module")
def peer(tmp_path_factory) -> Iterator[PeerServer]:
    """`langgraph dev` only: the page reads any LangGraph server's history the same way."""
    server = PeerServer("langgraph-dev", tmp_path_factory.mktemp("langgraph-dev"))
    server.start()
    yield server
    server.remove()


def test_a_remote_threads_page_reads_as_the_graph_does(
    asgi_server, browser_page, peer, reviewers_group, reviewer, manual_runs
):
    deployment = RemoteDeployment.objects.create(
        name="prod", base_url=peer.base_url, api_key="key", reviewer_group=reviewers_group
    )
    remote_id = peer.interrupted_thread("review", request="the quarterly report")
    [row] = mirrored(deployment, remote_id)
    manual_runs(decide(row, reviewer, "accept").resume_run)

    page = browser_page(asgi_server, "rita")
    page.goto(f"/threads/{row.thread_id}/")
    meta = page.inner_text(".thread-head .meta")
    assert "reviewers" in meta and not re.search(r"reviewers\s+reviewers", meta)
    summary = page.inner_text("#history summary")
    assert "fork" not in summary.replace("where forks are made", "")
    assert "read from prod" in summary

    page.click("#history summary")
    page.wait_for_selector("#history li.checkpoint")
    steps = page.locator("#history li.checkpoint .what").all_inner_texts()
    words = " ".join(steps)
    assert "Run started" in words and "review" in words and "act" in words
    assert not re.search(r"\b(loop|input)\b|__start__|__end__", words), steps
    assert page.locator("#history .btn-fork").count() == 0
    shots(page, "remote-thread-history")
    assert page.errors == []
