"""Staff status opens admin and nothing more: each operator action needs the model's
change permission, analytics needs a permission that already shows every interrupt, and
a failed run's traceback is for those who may read runs in admin. In-process; SQLite and
PostgreSQL."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.test import Client

from hitl.core import runs
from hitl.core.errors import Forbidden
from hitl.core.models import HumanInterrupt, Run
from hitl.core.worker import lease
from hitl.ops import services as ops_services
from tests.conftest import _make_user
from tests.review.conftest import human_interrupt, open_interrupts


def staff_with(*codenames: str):
    user = _make_user("staff-" + "-".join(codenames or ("bare",)), is_staff=True)
    for codename in codenames:
        user.user_permissions.add(
            Permission.objects.get(codename=codename, content_type__app_label="hitl")
        )
    return user


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def pending_row(settings, requester, reviewers_group):
    settings.HITL_EXECUTOR = "manual"
    _, (row,) = open_interrupts(user=requester, values=[human_interrupt()])
    return row


@pytest.fixture
def failed_run(settings, requester):
    settings.HITL_EXECUTOR = "manual"
    run = runs.run_start(graph="approval", input={}, user=requester, title="Failing")
    lease.run_lease_take(run_id=run.pk, worker="w")
    lease.run_fail(run_id=run.pk, worker="w", error="Traceback (most recent call last):\nboom")
    return run


def test_bare_staff_cannot_expire_or_reassign_an_interrupt(pending_row, finance_group):
    staff = staff_with("view_humaninterrupt")
    with pytest.raises(Forbidden, match="hitl.change_humaninterrupt"):
        ops_services.interrupt_expire(interrupt_id=pending_row.pk, user=staff)
    with pytest.raises(Forbidden, match="hitl.change_humaninterrupt"):
        ops_services.interrupt_reassign(
            interrupt_id=pending_row.pk, group=finance_group, user=staff
        )
    pending_row.refresh_from_db()
    assert pending_row.status == HumanInterrupt.Status.PENDING
    assert pending_row.reviewer_group.name == "reviewers"


def test_the_change_permission_allows_reassigning(pending_row, finance_group):
    staff = staff_with("change_humaninterrupt")
    ops_services.interrupt_reassign(interrupt_id=pending_row.pk, group=finance_group, user=staff)
    pending_row.refresh_from_db()
    assert pending_row.reviewer_group == Group.objects.get(name="finance")


def test_retrying_a_run_needs_the_change_permission(failed_run):
    with pytest.raises(Forbidden, match="hitl.change_run"):
        ops_services.run_retry(run_id=failed_run.pk, user=staff_with("view_run"))
    assert Run.objects.get(pk=failed_run.pk).status == Run.Status.ERROR
    ops_services.run_retry(run_id=failed_run.pk, user=staff_with("change_run"))
    assert Run.objects.get(pk=failed_run.pk).status == Run.Status.QUEUED


@pytest.mark.parametrize(
    ("model", "action"),
    [
        ("thread", "cancel_threads"),
        ("run", "retry_runs"),
        ("humaninterrupt", "expire_interrupts"),
        ("humaninterrupt", "reassign_interrupts"),
    ],
)
def test_admin_offers_an_action_only_with_the_change_permission(model, action, db):
    viewer = logged_in(staff_with(f"view_{model}"))
    page = viewer.get(f"/admin/hitl/{model}/")
    assert page.status_code == 200
    assert f'value="{action}"' not in page.content.decode()
    changer = logged_in(staff_with(f"change_{model}"))
    assert f'value="{action}"' in changer.get(f"/admin/hitl/{model}/").content.decode()


def test_analytics_needs_a_permission_that_sees_every_interrupt(db):
    bare = logged_in(staff_with())
    assert bare.get("/analytics/").status_code == 403
    assert 'href="/analytics/"' not in bare.get("/tokens/").content.decode()
    viewer = logged_in(staff_with("view_humaninterrupt"))
    assert viewer.get("/analytics/").status_code == 200
    assert 'href="/analytics/"' in viewer.get("/tokens/").content.decode()


def test_a_traceback_shows_only_to_those_who_may_read_runs_in_admin(failed_run, requester):
    page = logged_in(requester).get(f"/threads/{failed_run.thread_id}/").content.decode()
    assert "boom" in page and "Traceback (most recent call last)" not in page  # the headline
    requester.user_permissions.add(Permission.objects.get(codename="view_run"))
    requester = type(requester).objects.get(pk=requester.pk)  # drop the permission cache
    page = logged_in(requester).get(f"/threads/{failed_run.thread_id}/").content.decode()
    assert "Traceback (most recent call last):\nboom" in page and "Full traceback" in page
    assert page.count("Traceback (most recent call last)") == 1  # in the banner only
