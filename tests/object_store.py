"""A real S3 server for the tests of files in a bucket: moto's server mode, one process
per test module on a free port, with one empty bucket.

Import `s3_server` into a test module (module-scoped). `env()` is what a HITL process
needs to keep its files there; `storage()` is the STORAGES entry hitl/settings.py builds
from that environment, for the test process itself.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import boto3
import pytest

from tests.conftest import BIN, PYTHON, ROOT, Proc, free_port, spawn, wait_for

BUCKET = "hitl-files-test"
ACCESS_KEY = "hitl-test-access-key"
# Never shown anywhere: the tests look for it in pages, logs, /healthz and /metrics.
SECRET_KEY = "s3-s3cr3t-9b8a7c6d5e4f-never-shown"


@dataclass
class S3Server:
    endpoint: str
    proc: Proc
    bucket: str = BUCKET
    _storage: dict[str, Any] = field(default_factory=dict)

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "HITL_FILES_S3_BUCKET": self.bucket,
            "HITL_FILES_S3_ENDPOINT_URL": self.endpoint,
            "HITL_FILES_S3_REGION": "us-east-1",
            "HITL_FILES_S3_ACCESS_KEY_ID": ACCESS_KEY,
            "HITL_FILES_S3_SECRET_ACCESS_KEY": SECRET_KEY,
            **extra,
        }

    def storage(self) -> dict[str, Any]:
        """STORAGES["default"] as a process started with env() has it (read by one)."""
        if not self._storage:
            script = "import json, hitl.settings as s; print(json.dumps(s.STORAGES['default']))"
            out = subprocess.run(
                [PYTHON, "-c", script],
                env={**os.environ, **self.env()},
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            self._storage.update(json.loads(out.stdout))
        return self._storage

    @cached_property
    def client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )

    def keys(self, prefix: str = "") -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        )
        return sorted(obj["Key"] for page in pages for obj in page.get("Contents", ()))

    def read(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)


def start_s3_server(log) -> S3Server:
    port = free_port()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    proc = spawn([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)], env, log)

    def up() -> bool:
        if proc.popen.poll() is not None:
            raise AssertionError(f"moto_server exited:\n{proc.output()[-3000:]}")
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    wait_for(up, 30, 0.05, "moto_server to listen")
    server = S3Server(endpoint=f"http://127.0.0.1:{port}", proc=proc)
    server.client.create_bucket(Bucket=server.bucket)
    return server


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory) -> Iterator[S3Server]:
    """One S3 server for the module (moto_server on a free port), its bucket created."""
    server = start_s3_server(tmp_path_factory.mktemp("s3") / "moto.log")
    try:
        yield server
    finally:
        server.proc.stop()
