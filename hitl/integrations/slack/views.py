"""Slack's interactivity endpoint (the app's Request URL): thin over interactivity.py."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from hitl.integrations.slack import interactivity


@csrf_exempt  # Slack cannot send a CSRF token; its signature authenticates the request
@require_POST
def slack_interactivity(request):
    if not settings.HITL_SLACK_SIGNING_SECRET:
        raise Http404("Slack interactivity is not set up.")
    if request.content_type != "application/x-www-form-urlencoded":
        # What Slack sends; any other body (a multipart one above all) is not Slack's.
        return JsonResponse(
            {"error": "Expected a form-encoded payload= with a JSON object."}, status=400
        )
    body = request.body
    timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
    signature = request.headers.get("X-Slack-Signature", "")
    try:
        interactivity.check_shape(body, timestamp, signature)
        interactivity.verify(body, timestamp, signature)
        # Read before remembering: an unreadable request leaves nothing behind.
        payload = interactivity.parse(body)
        interactivity.remember(signature)
        try:
            outcome = interactivity.handle(payload)
        except interactivity.BadRequest:
            interactivity.forget(signature)  # nothing was done: nothing to replay
            raise
    except interactivity.Refused as exc:
        return JsonResponse({"error": str(exc)}, status=401)
    except interactivity.BadRequest as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    if outcome.body is not None:
        return JsonResponse(outcome.body, status=outcome.status)
    return HttpResponse(status=outcome.status)
