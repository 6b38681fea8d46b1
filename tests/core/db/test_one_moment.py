"""snapshot.one_moment(): every read inside sees the database as it was at the first.

A thread page's sections take many queries; a run failing between two of them gave the
page a failure banner beside the status "running". Postgres's READ COMMITTED shows each
statement what is committed when it starts, so the block asks for REPEATABLE READ.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from hitl.core.db import snapshot
from hitl.core.models import Thread

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def commit_elsewhere(thread_id, status: str) -> None:
    """Change the thread's status on another connection, committed when this returns."""

    def change() -> None:
        try:
            Thread.objects.filter(pk=thread_id).update(status=status)
        finally:
            connection.close()

    worker = threading.Thread(target=change)
    worker.start()
    worker.join()


def test_a_change_committed_inside_the_block_is_not_seen_until_it_ends(requester):
    thread = Thread.objects.create(graph="approval", requester=requester, status="busy")
    with snapshot.one_moment():
        assert Thread.objects.get(pk=thread.pk).status == "busy"
        commit_elsewhere(thread.pk, "error")
        assert Thread.objects.get(pk=thread.pk).status == "busy"
    assert Thread.objects.get(pk=thread.pk).status == "error"


def test_the_block_writes_nothing(requester):
    thread = Thread.objects.create(graph="approval", requester=requester, status="busy")
    with pytest.raises(Exception, match="read-only transaction"), snapshot.one_moment():
        Thread.objects.filter(pk=thread.pk).update(status="error")
    assert Thread.objects.get(pk=thread.pk).status == "busy"


def test_inside_a_callers_transaction_it_changes_nothing(requester):
    thread = Thread.objects.create(graph="approval", requester=requester, status="busy")
    with transaction.atomic():
        Thread.objects.filter(pk=thread.pk).update(status="idle")
        with snapshot.one_moment():  # no SET TRANSACTION after a statement: no error
            assert Thread.objects.get(pk=thread.pk).status == "idle"
