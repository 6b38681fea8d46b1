"""One small world per test: a requester's paused thread (one pending interrupt routed to
the reviewers, one presented file), a finished thread of theirs with a real checkpoint
history, and one user per role."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from hitl.core.files.storage import thread_files
from hitl.core.models import ApiToken, Artifact, HumanInterrupt, Thread
from hitl.core.registry import registry
from hitl.core.runs.graphs import checkpointer
from tests.conftest import _make_user
from tests.review.conftest import human_interrupt, open_interrupts

FILE_PATH = "/mnt/user-data/outputs/report.txt"
FILE_BODY = b"quarterly figures\n"
TITLE = "Matrix thread 7f3a"


def _grant(user, *codenames: str):
    for codename in codenames:
        user.user_permissions.add(
            Permission.objects.get(codename=codename, content_type__app_label="hitl")
        )
    return user


def make_role_user(role: str, reviewers_group):
    """The user playing `role` in the permission table (docs/permissions.md) (None: anonymous)."""
    if role == "anonymous":
        return None
    if role == "outsider":
        return _make_user("oscar")
    if role == "reviewer":
        return _make_user("rita", reviewers_group)
    if role == "review_all":
        return _grant(_make_user("vera"), "review_all")
    if role == "run_any_thread":
        return _grant(_make_user("rex", reviewers_group), "run_any_thread")
    if role == "staff":
        return _make_user("stella", is_staff=True)
    if role == "staff_perms":
        return _grant(_make_user("sven", is_staff=True), "view_thread", "change_thread")
    if role == "superuser":
        return _make_user("ada", is_staff=True, is_superuser=True)
    raise AssertionError(f"unknown role {role!r}")


@dataclass
class World:
    role: str
    user: Any  # None for anonymous
    requester: Any
    paused: Thread  # pending interrupt routed to the reviewers' group, one file
    row: HumanInterrupt
    artifact: Artifact
    done: Thread  # finished, the reviewers' group's
    step: str  # a checkpoint of `done` before its last node ran (its history has two)
    other_reviewer: Any  # another member of the reviewers' group
    token: ApiToken  # one of the requester's API tokens

    @property
    def page(self) -> Client:
        client = Client()
        if self.user is not None:
            client.force_login(self.user)
        return client

    def api(self, method: str, path: str, body: Any = None, **extra) -> Any:
        """A JSON (or, with `files`, multipart) call with the user's token, if any."""
        client = Client()
        headers = {}
        if self.user is not None:
            _, key = ApiToken.issue(user=self.user, name="matrix")
            headers["HTTP_AUTHORIZATION"] = f"Bearer {key}"
        call = getattr(client, method)
        if "files" in extra:
            return call(path, extra["files"], **headers)
        if method == "get":
            return call(path, body or {}, **headers)
        return call(path, json.dumps(body or {}), content_type="application/json", **headers)


def checkpoint_history(thread: Thread) -> str:
    """Write `thread` a real two-step history through the approval graph's checkpointer
    (the reviewer's accept, then the final node): the id of the step before the end."""
    graph = registry.get("approval", checkpointer())
    config = {"configurable": {"thread_id": str(thread.pk), "checkpoint_ns": ""}}
    decided = graph.update_state(config, {"decision": {"type": "accept"}}, as_node="propose")
    graph.update_state(config, {"sent": True, "result": {"sent": True}}, as_node="finish")
    return decided["configurable"]["checkpoint_id"]


@pytest.fixture
def world_for(settings, reviewers_group, requester, tmp_path):
    settings.HITL_EXECUTOR = "manual"
    settings.MEDIA_ROOT = str(tmp_path / "media")

    def build(role: str) -> World:
        user = requester if role == "requester" else make_role_user(role, reviewers_group)
        paused, (row,) = open_interrupts(user=requester, values=[human_interrupt()], title=TITLE)
        thread_files(paused.pk).write_bytes(FILE_PATH, FILE_BODY)
        artifact = Artifact.objects.create(
            thread=paused, path=FILE_PATH, size=len(FILE_BODY), mime="text/plain"
        )
        done = Thread.objects.create(
            graph="approval", requester=requester, reviewer_group=reviewers_group, status="done"
        )
        step = checkpoint_history(done)
        other = _make_user("olga", reviewers_group)
        token = ApiToken.issue(user=requester, name="the requester's")[0]
        return World(role, user, requester, paused, row, artifact, done, step, other, token)

    return build
