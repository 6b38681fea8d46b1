"""The suite's own machinery: a dead test connection costs one test, and each
pytest-xdist worker keeps to its own Redis db, var/ directory and ports."""

from __future__ import annotations

import os
import socket

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection

from tests.conftest import WORKER_PORTS, free_port, reopen_dead_connections
from tests.xdist_env import redis_url_for_worker, worker_index

WORKER = os.environ.get("PYTEST_XDIST_WORKER")


@pytest.mark.postgres
def test_a_test_connection_the_server_ended_is_reopened_on_an_emptied_database(
    request, test_database_url, transactional_db
):
    get_user_model().objects.create_user(username="left-behind")
    pid = connection.connection.info.backend_pid
    with psycopg.connect(test_database_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(OperationalError):
        get_user_model().objects.count()  # what every later test met before the guard

    assert reopen_dead_connections(request.config) == ["default"]

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid
    # The teardown flush the dead connection could not run has been done.
    assert not get_user_model().objects.filter(username="left-behind").exists()
    assert reopen_dead_connections(request.config) == []  # a live one is left alone


def test_each_worker_takes_the_redis_db_below_the_previous_ones():
    assert redis_url_for_worker("redis://127.0.0.1:6379/15", 0) == "redis://127.0.0.1:6379/15"
    assert redis_url_for_worker("redis://127.0.0.1:6379/15", 1) == "redis://127.0.0.1:6379/14"
    assert redis_url_for_worker("redis://:pw@host:6380/3", 3) == "redis://:pw@host:6380/0"
    with pytest.raises(pytest.UsageError, match="fewer workers"):
        redis_url_for_worker("redis://127.0.0.1:6379/1", 2)


@pytest.mark.skipif(not WORKER, reason="runs under pytest-xdist (make test)")
def test_this_worker_has_its_own_redis_db_var_dir_and_ports():
    assert settings.VAR_DIR.name == f"pytest-{WORKER}"
    assert os.environ["HITL_VAR_DIR"] == str(settings.VAR_DIR)  # its servers' too
    if settings.REDIS_URL:
        given = os.environ["PYTEST_SUITE_REDIS_URL"]
        assert redis_url_for_worker(given, worker_index()) == settings.REDIS_URL
        assert os.environ["REDIS_URL"] == settings.REDIS_URL
    low = 20000 + worker_index() * WORKER_PORTS
    ports = [free_port() for _ in range(20)]
    assert len(set(ports)) == 20  # none given twice
    assert all(low <= port < low + WORKER_PORTS for port in ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[0]))  # and free
