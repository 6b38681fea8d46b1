"""`python -m hitl.web` is daphne, with daphne's arguments, serving on uvloop."""

import os
import urllib.request

from tests.conftest import free_port, spawn, wait_for, web_command


def test_the_web_process_serves_on_uvloop(tmp_path):
    port = free_port()
    web = spawn(
        web_command(port, "tests.loop_probe:app"),
        dict(os.environ),
        tmp_path / "web.log",
    )
    answers: list[bytes] = []

    def answered() -> bool:
        assert web.popen.poll() is None, web.output()[-3000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
                answers.append(response.read())
        except OSError:
            return False
        return True

    try:
        wait_for(answered, 60, 0.1, "the web process to answer")
    finally:
        web.stop()
    assert answers == [b"uvloop.Loop"]
