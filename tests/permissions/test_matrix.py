"""Every cell of the permission table (docs/permissions.md), on every HTTP surface its row names.

Each case plays one role against one surface and turns the real answer into a cell:
2xx (or a page's redirect after a successful POST) is `yes`, a redirect to a login page or
a 401 is `login`, 403 and 404 are themselves, and a list that leaves the item out is `no`.
A mutating case also checks the database: `yes` must have changed it, anything else must
not. Sockets are in test_sockets.py. Runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings

from hitl.core.decisions.answer import interrupt_resolve
from hitl.core.files.storage import thread_files
from hitl.core.models import ApiToken, Assistant, AuditEvent, HumanInterrupt, Run, Thread
from hitl.core.models.claims import InterruptClaim, InterruptSnooze
from hitl.core.models.notify import NotificationPreference
from hitl.core.resources.assistants import AssistantFields, assistant_create
from tests.conftest import store_clear
from tests.permissions.conftest import FILE_BODY, FILE_PATH, TITLE, World
from tests.permissions.matrix import ACTIONS, CELLS, PAGE, ROLES, expected, read_table

PENDING = HumanInterrupt.Status.PENDING


def api_cell(response) -> str:
    code = response.status_code
    if 200 <= code < 300:
        return "yes"
    if code in (401, 403, 404):
        return "login" if code == 401 else str(code)
    return f"HTTP {code}: {response.content[:300]!r}"


def page_cell(response, login: str = "/login/") -> str:
    code = response.status_code
    if code == 302 and response["Location"].startswith(login):
        return "login"
    if 200 <= code < 400:
        return "yes"
    if code in (403, 404):
        return str(code)
    return f"HTTP {code}: {response.content[:300]!r}"


def admin_cell(response) -> str:
    return page_cell(response, login="/admin/login/")


def changed(cell: str, did_change: bool) -> str:
    """The cell, unless the database disagrees with it."""
    if cell == "yes" and not did_change:
        return "yes, but nothing changed"
    if cell != "yes" and did_change:
        return f"{cell}, but it changed"
    return cell


def listed(response, marker: str) -> str:
    cell = api_cell(response) if "json" in response.get("Content-Type", "") else page_cell(response)
    if cell != "yes":
        return cell
    return "yes" if marker in response.content.decode() else "no"


def pending(w: World) -> bool:
    return HumanInterrupt.objects.filter(pk=w.row.pk, status=PENDING).exists()


def runs_on_done(w: World) -> int:
    return Run.objects.filter(thread=w.done).count()


# --- the surfaces of each action ---------------------------------------------------


def start_thread_page(w: World) -> str:
    before = Thread.objects.count()
    form = {"graph": "approval", "title": "new", "input": "{}"}
    return changed(page_cell(w.page.post("/threads/new/", form)), Thread.objects.count() > before)


def start_thread_v1(w: World) -> str:
    before = Thread.objects.count()
    response = w.api("post", "/api/v1/threads", {"graph": "approval", "input": {}})
    return changed(api_cell(response), Thread.objects.count() > before)


def start_thread_langgraph(w: World) -> str:
    before = Thread.objects.count()
    response = w.api("post", "/langgraph/threads", {})
    return changed(api_cell(response), Thread.objects.count() > before)


def view_page(w: World) -> str:
    response = w.page.get(f"/threads/{w.paused.pk}/")
    cell = page_cell(response)
    return cell if cell != "yes" or TITLE in response.content.decode() else "yes, but no title"


def view_v1(w: World) -> str:
    return api_cell(w.api("get", f"/api/v1/threads/{w.paused.pk}"))


def view_langgraph(w: World) -> str:
    return api_cell(w.api("get", f"/langgraph/threads/{w.paused.pk}"))


def download_page(w: World) -> str:
    response = w.page.get(f"/threads/{w.paused.pk}/files/{w.artifact.pk}/")
    cell = page_cell(response)
    if cell == "yes" and b"".join(response.streaming_content) != FILE_BODY:
        return "yes, but not the file"
    return cell


def download_v1(w: World) -> str:
    response = w.api("get", f"/api/v1/threads/{w.paused.pk}/files", {"path": FILE_PATH})
    cell = api_cell(response)
    if cell == "yes" and b"".join(response.streaming_content) != FILE_BODY:
        return "yes, but not the file"
    return cell


def list_thread_page(w: World) -> str:
    return listed(w.page.get("/", {"tab": "all"}), TITLE)


def list_thread_langgraph(w: World) -> str:
    return listed(w.api("post", "/langgraph/threads/search", {"limit": 100}), str(w.paused.pk))


def list_interrupt_page(w: World) -> str:
    return listed(w.page.get("/"), f'id="row-{w.row.pk}"')


def list_interrupt_v1(w: World) -> str:
    return listed(w.api("get", "/api/v1/interrupts"), str(w.row.pk))


def explained(response, cell: str, reason: str) -> str:
    """A page's 403 shows why (the thread page, with the refusal as a flash)."""
    if cell == "403" and reason not in response.content.decode():
        return "403, but no reason shown"
    return cell


def answer_page(w: World) -> str:
    response = w.page.post(f"/interrupts/{w.row.pk}/decide/", {"type": "accept"})
    cell = explained(response, page_cell(response), "routed to a reviewer group you are not in")
    return changed(cell, not pending(w))


def answer_v1(w: World) -> str:
    response = w.api("post", f"/api/v1/interrupts/{w.row.pk}/decision", {"type": "accept"})
    return changed(api_cell(response), not pending(w))


def answer_langgraph(w: World) -> str:
    body = {"assistant_id": "approval", "command": {"resume": {"type": "accept"}}}
    response = w.api("post", f"/langgraph/threads/{w.paused.pk}/runs", body)
    return changed(api_cell(response), not pending(w))


def agui_input(thread: Thread, **fields) -> dict:
    return {"threadId": str(thread.pk), "runId": "run-m", "messages": [], "state": {}, **fields}


def answer_agui(w: World) -> str:
    resume = [{"interruptId": str(w.row.pk), "status": "resolved", "payload": {"type": "accept"}}]
    response = w.api("post", "/agui/approval", agui_input(w.paused, resume=resume))
    return changed(api_cell(response), not pending(w))


def run_v1(w: World) -> str:
    body = {"input": {"request": "again"}}
    response = w.api("post", f"/api/v1/threads/{w.done.pk}/runs", body)
    return changed(api_cell(response), runs_on_done(w) > 0)


def run_langgraph(w: World) -> str:
    body = {"assistant_id": "approval", "input": {"request": "again"}}
    response = w.api("post", f"/langgraph/threads/{w.done.pk}/runs", body)
    return changed(api_cell(response), runs_on_done(w) > 0)


def run_agui(w: World) -> str:
    response = w.api("post", "/agui/approval", agui_input(w.done))
    return changed(api_cell(response), runs_on_done(w) > 0)


def upload_v1(w: World) -> str:
    upload = SimpleUploadedFile("notes.txt", b"from the matrix", content_type="text/plain")
    response = w.api("post", f"/api/v1/threads/{w.done.pk}/files", files={"file": upload})
    stored = thread_files(w.done.pk).exists("/mnt/user-data/uploads/notes.txt")
    return changed(api_cell(response), stored)


def metadata_langgraph(w: World) -> str:
    body = {"metadata": {"matrix": "set"}}
    response = w.api("patch", f"/langgraph/threads/{w.done.pk}", body)
    w.done.refresh_from_db()
    return changed(api_cell(response), w.done.metadata.get("matrix") == "set")


def cancel_page(w: World) -> str:
    response = w.page.post(f"/threads/{w.paused.pk}/cancel/")
    cell = explained(response, page_cell(response), "can cancel it")
    return changed(cell, not pending(w))


def cancel_v1(w: World) -> str:
    return changed(api_cell(w.api("post", f"/api/v1/threads/{w.paused.pk}/cancel")), not pending(w))


def cancel_langgraph(w: World) -> str:
    # The Agent Inbox's "mark as resolved".
    body = {"values": None, "as_node": "__end__"}
    response = w.api("post", f"/langgraph/threads/{w.paused.pk}/state", body)
    return changed(api_cell(response), not pending(w))


def admin_view(w: World) -> str:
    response = w.page.get(f"/admin/hitl/thread/{w.paused.pk}/change/")
    cell = admin_cell(response)
    return cell if cell != "yes" or TITLE in response.content.decode() else "yes, but no title"


def admin_cancel(w: World) -> str:
    form = {"action": "cancel_threads", "_selected_action": [str(w.paused.pk)]}
    return changed(admin_cell(w.page.post("/admin/hitl/thread/", form)), not pending(w))


def analytics_page(w: World) -> str:
    return page_cell(w.page.get("/analytics/"))


# --- issue 27: the thread verbs, time travel, bulk, claim/snooze, undo, tokens, notification
# settings ---


def script_cell(response) -> str:
    """A page's answer to its own scripts (Accept: JSON): 401 when signed out, 409 when the
    item's state refuses it (an answer that is not the caller's to undo)."""
    if response.status_code == 409:
        return "409"
    return api_cell(response)


def delete_langgraph(w: World) -> str:
    response = w.api("delete", f"/langgraph/threads/{w.done.pk}")
    return changed(api_cell(response), not Thread.objects.filter(pk=w.done.pk).exists())


def prune_langgraph(w: World) -> str:
    response = w.api("post", "/langgraph/threads/prune", {"thread_ids": [str(w.done.pk)]})
    cell = api_cell(response)
    if cell == "yes" and response.json()["pruned_count"] == 0:
        cell = "404"  # prune passes over a thread its caller cannot see, as LangGraph does
    return changed(cell, not Thread.objects.filter(pk=w.done.pk).exists())


def run_delete_langgraph(w: World) -> str:
    run = Run.objects.create(thread=w.done, kind="start", status="success")
    response = w.api("delete", f"/langgraph/threads/{w.done.pk}/runs/{run.pk}")
    return changed(api_cell(response), not Run.objects.filter(pk=run.pk).exists())


def copy_langgraph(w: World) -> str:
    before = Thread.objects.count()
    response = w.api("post", f"/langgraph/threads/{w.done.pk}/copy")
    return changed(api_cell(response), Thread.objects.count() > before)


def update_state_langgraph(w: World) -> str:
    body = {"values": {"request": "edited"}, "as_node": "finish"}
    response = w.api("post", f"/langgraph/threads/{w.done.pk}/state", body)
    updated = AuditEvent.objects.filter(
        thread=w.done, kind=AuditEvent.Kind.THREAD_STATE_UPDATED
    ).exists()
    return changed(api_cell(response), updated)


def forks_on_done(w: World) -> int:
    return Run.objects.filter(thread=w.done, checkpoint_id__gt="").count()


def history_page(w: World) -> str:
    """The thread page's History (loaded when opened) lists the finished thread's steps."""
    response = w.page.get(f"/threads/{w.done.pk}/history/", {"partial": "1"})
    return listed(response, f'data-checkpoint="{w.step}"')


def history_langgraph(w: World) -> str:
    return listed(w.api("get", f"/langgraph/threads/{w.done.pk}/history"), w.step)


def fork_page(w: World) -> str:
    response = w.page.post(f"/threads/{w.done.pk}/fork/", {"checkpoint_id": w.step})
    cell = explained(response, page_cell(response), "can fork it")
    forked = AuditEvent.objects.filter(thread=w.done, kind=AuditEvent.Kind.THREAD_FORKED).exists()
    return changed(cell, forked and forks_on_done(w) > 0)


def fork_langgraph(w: World) -> str:
    body = {"assistant_id": "approval", "checkpoint_id": w.step}
    response = w.api("post", f"/langgraph/threads/{w.done.pk}/runs", body)
    return changed(api_cell(response), forks_on_done(w) > 0)


def bulk_page(w: World) -> str:
    """The inbox's bulk accept: 200 with one result per item; the item's outcome is the cell."""
    response = w.page.post("/interrupts/bulk/", {"ids": [str(w.row.pk)], "type": "accept"})
    cell = page_cell(response)
    if cell == "yes":
        (item,) = response.json()["results"]
        cell = {"decided": "yes", "refused": "403"}.get(item["outcome"], item["outcome"])
        if cell == "403" and item["reason"] == "No such item.":
            # Unseen: "not found", and nothing about the item (issue 27, item 4).
            cell = "404, but labelled" if item["label"] or item["href"] else "404"
    return changed(cell, not pending(w))


def claim_page(w: World) -> str:
    response = w.page.post(f"/interrupts/{w.row.pk}/claim/", HTTP_ACCEPT="application/json")
    return changed(script_cell(response), InterruptClaim.objects.filter(interrupt=w.row).exists())


def snooze_page(w: World) -> str:
    response = w.page.post(
        f"/interrupts/{w.row.pk}/snooze/", {"for": "1h"}, HTTP_ACCEPT="application/json"
    )
    return changed(script_cell(response), InterruptSnooze.objects.filter(interrupt=w.row).exists())


def answered_by_another(w: World) -> None:
    """The pending item, answered by another reviewer of the group, still undoable."""
    with override_settings(HITL_UNDO_SECONDS=300):
        interrupt_resolve(interrupt_id=w.row.pk, user=w.other_reviewer, response_type="accept")


def undo_page(w: World) -> str:
    answered_by_another(w)
    response = w.page.post(f"/interrupts/{w.row.pk}/undo/", HTTP_ACCEPT="application/json")
    return changed(script_cell(response), pending(w))


def undo_v1(w: World) -> str:
    answered_by_another(w)
    response = w.api("post", f"/api/v1/interrupts/{w.row.pk}/undo")
    return changed(script_cell(response), pending(w))


def revoke_token_page(w: World) -> str:
    response = w.page.post(f"/tokens/{w.token.pk}/revoke/")
    return changed(page_cell(response), not ApiToken.objects.filter(pk=w.token.pk).exists())


def notify_settings_page(w: World) -> str:
    form = {"email": "on", "digest_minutes": "15", "timezone": "UTC"}
    response = w.page.post("/settings/notifications/", form)
    saved = NotificationPreference.objects.filter(user=w.user, digest_minutes=15).exists()
    return changed(page_cell(response), saved)


def assistant_create_langgraph(w: World) -> str:
    response = w.api("post", "/langgraph/assistants", {"graph_id": "approval", "name": "mine"})
    return changed(api_cell(response), Assistant.objects.filter(name="mine").exists())


def _requesters_assistant(w: World) -> str:
    return assistant_create(
        user=w.requester, graph="approval", fields=AssistantFields(name="theirs")
    ).assistant_id


def assistant_update_langgraph(w: World) -> str:
    pk = _requesters_assistant(w)
    response = w.api("patch", f"/langgraph/assistants/{pk}", {"name": "renamed"})
    return changed(api_cell(response), Assistant.objects.get(pk=pk).name == "renamed")


def assistant_delete_langgraph(w: World) -> str:
    pk = _requesters_assistant(w)
    response = w.api("delete", f"/langgraph/assistants/{pk}")
    return changed(api_cell(response), not Assistant.objects.filter(pk=pk).exists())


def store_put_langgraph(w: World) -> str:
    from hitl.core.runs.graphs import store

    store_clear()
    body = {"namespace": ["matrix", w.role], "key": "k", "value": {"v": 1}}
    response = w.api("put", "/langgraph/store/items", body)
    return changed(api_cell(response), store().get(("matrix", w.role), "k") is not None)


def store_get_langgraph(w: World) -> str:
    from hitl.core.runs.graphs import store

    store_clear()
    store().put(("matrix", "read", w.role), "k", {"v": "secret"})
    response = w.api(
        "get", "/langgraph/store/items", {"namespace": f"matrix.read.{w.role}", "key": "k"}
    )
    cell = api_cell(response)
    return cell if cell != "yes" or b"secret" in response.content else "yes, but no item"


SURFACES: dict[str, dict[str, Callable[[World], str]]] = {
    "start_thread": {
        "page": start_thread_page,
        "v1": start_thread_v1,
        "langgraph": start_thread_langgraph,
    },
    "view": {"page": view_page, "v1": view_v1, "langgraph": view_langgraph},
    "download": {"page": download_page, "v1": download_v1},
    "list_thread": {"page": list_thread_page, "langgraph": list_thread_langgraph},
    "list_interrupt": {"page": list_interrupt_page, "v1": list_interrupt_v1},
    "answer": {
        "page": answer_page,
        "v1": answer_v1,
        "langgraph": answer_langgraph,
        "agui": answer_agui,
    },
    "run": {"v1": run_v1, "langgraph": run_langgraph, "agui": run_agui},
    "upload": {"v1": upload_v1},
    "metadata": {"langgraph": metadata_langgraph},
    "cancel": {"page": cancel_page, "v1": cancel_v1, "langgraph": cancel_langgraph},
    "admin_view": {"admin": admin_view},
    "admin_cancel": {"admin": admin_cancel},
    "analytics": {"page": analytics_page},
    "delete": {"langgraph": delete_langgraph, "prune": prune_langgraph},
    "run_delete": {"langgraph": run_delete_langgraph},
    "copy": {"langgraph": copy_langgraph},
    "update_state": {"langgraph": update_state_langgraph},
    "history": {"page": history_page, "langgraph": history_langgraph},
    "fork": {"page": fork_page, "langgraph": fork_langgraph},
    "bulk": {"page": bulk_page},
    "claim": {"claim": claim_page, "snooze": snooze_page},
    "undo": {"page": undo_page, "v1": undo_v1},
    "revoke_token": {"page": revoke_token_page},
    "notify_settings": {"page": notify_settings_page},
    "assistant_create": {"langgraph": assistant_create_langgraph},
    "store": {"put": store_put_langgraph, "get": store_get_langgraph},
    "assistant_change": {
        "update": assistant_update_langgraph,
        "delete": assistant_delete_langgraph,
    },
}

CASES = [
    pytest.param(action, surface, role, id=f"{action}-{surface}-{role}")
    for action, surfaces in SURFACES.items()
    for surface in surfaces
    for role in ROLES.values()
]


@pytest.mark.parametrize(("action", "surface", "role"), CASES)
def test_the_documented_cell_holds(action, surface, role, world_for):
    world = world_for(role)
    assert SURFACES[action][surface](world) == expected(action, role)


@pytest.mark.parametrize("verb", ["delete", "run_delete", "copy", "update_state"])
def test_staff_status_grants_no_thread_verb(verb, world_for, reviewers_group):
    """A staff reviewer of the group sees the thread, and may change it no more than the
    same reviewer without staff status (issue 27, item 2)."""
    world = world_for("reviewer")
    world.user.is_staff = True
    world.user.save()
    assert SURFACES[verb]["langgraph"](world) == "403"


def test_the_permission_table_is_complete():
    """Every row and column of the table has tests (the sockets' rows in test_sockets.py)."""
    page_roles, page_actions, cells = read_table()
    assert page_roles == list(ROLES)
    assert page_actions == list(ACTIONS)
    assert set(SURFACES) == set(ACTIONS.values())
    assert set(cells.values()) <= CELLS
    assert len(cells) == len(ACTIONS) * len(ROLES)


def test_a_row_or_role_the_tests_do_not_know_is_caught():
    text = PAGE.read_text()
    renamed = text.replace("| superuser |\n|---", "| root |\n|---", 1)
    assert read_table(renamed)[0][-1] == "root" != list(ROLES)[-1]
    extra = text.replace(
        "| see analytics (page) |",
        "| see secrets (page) | yes |" + " yes |" * 8 + "\n| see analytics (page) |",
        1,
    )
    assert "see secrets (page)" in read_table(extra)[1]
