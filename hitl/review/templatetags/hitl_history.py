"""The thread page's checkpoint history (time travel), rendered where it is included."""

from django import template

from hitl.review.timetravel import history_context

register = template.Library()


@register.inclusion_tag("hitl/partials/thread_history.html", takes_context=True)
def thread_history(context, thread):
    request = context["request"]
    return {**history_context(thread), "thread": thread, "request": request}
