"""Helpers for the reviewer web app tests: interrupts with any value, logged-in clients."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from hitl.core import runs
from hitl.core.worker import lease, pauses_record

WORKER = "ui-tests"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A browser test that failed says what its pages showed at that moment."""
    report = yield
    pages = getattr(item, "funcargs", {}).get("browser_page")
    if report.when == "call" and report.failed and pages is not None:
        from tests.review.test_browser import describe_pages

        report.sections.append(("browser pages", describe_pages(pages)))
    return report


def open_interrupts(
    *,
    user,
    values: list[Any],
    graph: str = "approval",
    title: str = "",
    schemas: list[Any] | None = None,
    thread=None,
):
    """A thread (a new one, or `thread` run again) paused on the given interrupt values
    (no graph runs: the run is recorded as if a worker had streamed it), returning
    (thread, this run's rows in creation order)."""
    run = runs.run_start(graph=graph, input={}, user=user, title=title or graph, thread=thread)
    lease.run_lease_take(run_id=run.pk, worker=WORKER)
    schemas = schemas or [None] * len(values)
    pauses_record.run_finish(
        run_id=run.pk,
        worker=WORKER,
        interrupts=[(uuid.uuid4().hex, v, s) for v, s in zip(values, schemas, strict=True)],
        result=None,
    )
    thread = run.thread
    thread.refresh_from_db()
    rows = thread.interrupts.filter(run_id=run.pk)
    return thread, list(rows.order_by("created_at", "interrupt_id", "position"))


def human_interrupt(action: str = "send_email", args: dict | None = None, **extra) -> dict:
    value = {
        "action_request": {"action": action, "args": args if args is not None else {"to": "a@b.c"}},
        "config": {
            "allow_accept": True,
            "allow_edit": True,
            "allow_respond": True,
            "allow_ignore": True,
        },
        "description": "Send it?",
    }
    for key, item in extra.items():
        if key in ("allow_accept", "allow_edit", "allow_respond", "allow_ignore"):
            value["config"][key] = item
        else:
            value[key] = item
    return value


def decide_on_page(client, row, data: dict, **extra):
    """Post the thread page's answer form for one row, as a reviewer's browser does."""
    return client.post(f"/interrupts/{row.pk}/decide/", data, **extra)


@pytest.fixture
def paused(settings, db):
    """Make threads paused on chosen interrupt values (runs are not dispatched)."""
    settings.HITL_EXECUTOR = "manual"
    return open_interrupts


@pytest.fixture
def client_for(db):
    def make(user, **kwargs) -> Client:
        client = Client(**kwargs)
        client.force_login(user)
        return client

    return make


@pytest.fixture
def review_all_user(db):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username="vera", password="pw-vera")
    user.user_permissions.add(
        Permission.objects.get(codename="review_all", content_type__app_label="hitl")
    )
    return user


def live_markup(html: str) -> list[tuple[str, dict[str, str]]]:
    """Every element the browser would build from `html`, with its attributes."""
    from html.parser import HTMLParser

    found: list[tuple[str, dict[str, str]]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, {k: v or "" for k, v in attrs}))

    Collect().feed(html)
    return found


def dangerous_markup(html: str) -> list[str]:
    """Scripts, event handlers and javascript: URLs that would run in a browser (the
    app's own /static/ scripts excepted)."""
    bad = []
    for tag, attrs in live_markup(html):
        if tag == "script" and attrs.get("src", "").startswith("/static/"):
            continue
        if tag in ("script", "iframe", "object", "embed"):
            bad.append(f"<{tag}>")
        for name, value in attrs.items():
            if name.startswith("on"):
                bad.append(f"{tag}[{name}]")
            if name in ("href", "src", "action") and value.strip().lower().startswith(
                ("javascript:", "data:text/html")
            ):
                bad.append(f"{tag}[{name}={value}]")
    return bad


def checkpoints(thread, limit: int = 200) -> list[dict[str, Any]]:
    """The thread's steps, newest first, as dicts (id, step, next nodes, values)."""
    import json

    from hitl.core.history.history import thread_history_page

    return [
        {
            "checkpoint_id": step.checkpoint_id,
            "step": step.step,
            "next": step.next,
            "values": json.loads(step.values_json),
        }
        for step in thread_history_page(thread, limit=limit, with_values=True).steps
    ]
