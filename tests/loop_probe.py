"""An ASGI app that answers with the class of the event loop serving it (no Django)."""

import asyncio


async def app(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    loop = type(asyncio.get_running_loop())
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send(
        {"type": "http.response.body", "body": f"{loop.__module__}.{loop.__name__}".encode()}
    )
