"""How the APIs document a server-sent event stream in OpenAPI.

The schema of a `text/event-stream` response describes one event, as OpenAPI 3.2 and
schemathesis read it: an object with the event's name and its `data`, a JSON document
(with `data_schema`, one of that shape). tests/api/test_openapi_fuzz.py checks the
streams the servers really send against it.
"""

from __future__ import annotations

from typing import Any


def sse_response(description: str, data_schema: dict[str, Any] | None = None) -> dict:
    """`openapi_extra` for an operation whose 200 is an event stream."""
    data: dict[str, Any] = {"type": "string", "contentMediaType": "application/json"}
    if data_schema is not None:
        data["contentSchema"] = data_schema
    event = {
        "type": "object",
        "required": ["data"],
        "properties": {
            "event": {"type": "string"},
            "data": data,
            "id": {"type": "string"},
            "retry": {"type": "integer", "minimum": 0},
        },
    }
    return {
        "responses": {
            "200": {"description": description, "content": {"text/event-stream": {"schema": event}}}
        }
    }
