"""JSON answers for what no /langgraph route handles: an unknown path is a JSON 404 and
a known path with another method a JSON 405, as LangGraph Server (Starlette) answers
them, never Django's HTML pages."""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import JsonResponse

PREFIX = "/langgraph/"
DETAILS = {404: "Not Found", 405: "Method Not Allowed"}


def _as_json(request, response):
    if (
        response.status_code not in DETAILS
        or not request.path.startswith(PREFIX)
        or response.get("Content-Type", "").startswith("application/json")
    ):
        return response
    answer = JsonResponse({"detail": DETAILS[response.status_code]}, status=response.status_code)
    if response.has_header("Allow"):
        answer["Allow"] = response["Allow"]
    return answer


class UnroutedJsonMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        return _as_json(request, self.get_response(request))

    async def __acall__(self, request):
        return _as_json(request, await self.get_response(request))
