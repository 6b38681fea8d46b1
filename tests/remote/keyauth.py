"""Custom auth of the keyed `langgraph dev` in these tests: x-api-key must be one of the
keys in HITL_TEST_KEYS_FILE (read on each request, so a test can revoke a key)."""

import os
from pathlib import Path

from langgraph_sdk import Auth

auth = Auth()


@auth.authenticate
async def authenticate(headers: dict) -> str:
    sent = headers.get(b"x-api-key") or headers.get("x-api-key") or b""
    sent = sent.decode() if isinstance(sent, bytes) else sent
    keys = Path(os.environ["HITL_TEST_KEYS_FILE"]).read_text().split()
    if sent not in keys:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Invalid API key")
    return "hitl-tests"
