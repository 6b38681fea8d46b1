"""daphne hands POST bodies to Django unparsed: Twisted does not parse them a second time."""

from __future__ import annotations

import httpx
import pytest

from tests.api.conftest import token_for
from tests.api.test_uploads import BOUNDARY, a_file, multipart

pytestmark = pytest.mark.postgres


def test_daphnes_requests_skip_twisteds_form_parsing():
    from daphne import http_protocol

    import hitl.asgi  # noqa: F401 - what daphne imports before it serves

    request_class = http_protocol.WebRequest
    assert request_class.raw_bodies is True

    class Site:
        _parsePOSTFormSubmission = True

    class Channel:
        site = Site()

        class factory:  # noqa: N801 - daphne reads channel.factory.server
            class server:  # noqa: N801
                @staticmethod
                def protocol_connected(request):
                    pass

        @staticmethod
        def getPeer():  # noqa: N802 - Twisted's name
            return None

        getHost = getPeer  # noqa: N815
        transport = None

    assert request_class(Channel())._parsePOSTFormSubmission is False


def test_multipart_and_form_posts_still_reach_django(live, requester):
    headers = {"X-Api-Key": token_for(requester)}
    with httpx.Client(base_url=live.base_url, headers=headers, timeout=30) as client:
        started = client.post("/api/v1/threads", json={"graph": "approval", "input": {}})
        assert started.status_code in (200, 201), started.text
        thread_id = started.json()["thread_id"]
        data = bytes(range(256)) * 64
        body = multipart(a_file("notes.bin", data))
        uploaded = client.post(
            f"/api/v1/threads/{thread_id}/files",
            content=body,
            headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
        )
        assert uploaded.status_code == 201, uploaded.text
        path = uploaded.json()["path"]
        downloaded = client.get(f"/api/v1/threads/{thread_id}/files", params={"path": path})
        assert downloaded.status_code == 200 and downloaded.content == data
    # A urlencoded form: the login page reads its fields from Django's parse.
    with httpx.Client(base_url=live.base_url, timeout=30) as browser:
        page = browser.get("/login/")
        token = browser.cookies.get("csrftoken")
        assert page.status_code == 200 and token
        answer = browser.post(
            "/login/",
            data={"username": "nobody", "password": "wrong", "csrfmiddlewaretoken": token},
        )
        assert answer.status_code == 200 and "username" in answer.text.lower()
