"""Helpers for the decisions tests: paused items to answer, and reviewers racing over HTTP."""

from __future__ import annotations

import json
import threading

from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from hitl.core import runs
from hitl.core.models import ApiToken, HumanInterrupt


def paused(manual_runs, requester, **state) -> HumanInterrupt:
    run = runs.run_start(graph="approval", input=state, user=requester)
    assert manual_runs(run) == "interrupted"
    return HumanInterrupt.objects.get(run=run)


def reviewers_with_tokens(count: int, prefix: str, group) -> dict[str, str]:
    """count reviewers in group, each with an API key (no password: hashing would dominate)."""
    keys = {}
    for i in range(count):
        user = get_user_model().objects.create_user(username=f"{prefix}{i:02d}", password=None)
        user.groups.add(group)
        keys[user.username] = ApiToken.issue(user=user)[1]
    return keys


def race(calls: list[tuple[str, str, dict]]) -> list[tuple[str, int, dict]]:
    """POST every (key, path, body) at once, each from its own thread and connection."""
    barrier = threading.Barrier(len(calls))
    results: list[tuple[str, int, dict]] = []
    lock = threading.Lock()

    def call(key: str, path: str, body: dict) -> None:
        client = Client()
        try:
            barrier.wait(timeout=30)
            response = client.post(
                path,
                json.dumps(body),
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {key}",
            )
            with lock:
                results.append((key, response.status_code, response.json()))
        finally:
            connection.close()

    threads = [threading.Thread(target=call, args=c) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == len(calls)
    return results
