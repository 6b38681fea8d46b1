"""The run webhook remote deployments call when a run HITL started there ends."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from hitl.core.errors import ServiceError
from hitl.core.remote.webhook import webhook_receive


@csrf_exempt  # a LangGraph server sends no CSRF token; the URL's token authenticates it
@require_POST
def remote_webhook(request, name: str, token: str):
    try:
        made = webhook_receive(name=name, token=token, body=request.body)
    except ServiceError as exc:
        return JsonResponse({"error": exc.message}, status=exc.status_code)
    return JsonResponse({"ok": True, "made": made}, status=202)
