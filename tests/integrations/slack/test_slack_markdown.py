"""An item's Markdown description reaches Slack as mrkdwn: bold, links and lists as Slack
draws them, and no Markdown link that Slack would read as a mention."""

from __future__ import annotations

from tests.integrations.slack.conftest import notified
from tests.review.conftest import human_interrupt

DESCRIPTION = (
    "Send the **Q3 report** to [finance](https://example.com/f?a=1&b=2)?\n\n"
    "- totals\n- chart\n\n"
    "`keep **this**` and [ping everyone](!channel) or [them](@U0RITA) <b>not HTML</b>"
)


def context_texts(message: dict) -> list[str]:
    return [
        element["text"]
        for block in message["blocks"]
        if block["type"] == "context"
        for element in block["elements"]
    ]


def test_a_markdown_description_is_sent_as_slack_mrkdwn(
    django_capture_on_commit_callbacks, slack, requester, reviewer
):
    _, message = notified(
        django_capture_on_commit_callbacks,
        slack,
        requester,
        reviewer,
        human_interrupt("send_email", description=DESCRIPTION),
    )
    (text,) = [t for t in context_texts(message) if "Q3 report" in t]
    assert text.startswith("Send the *Q3 report* to <https://example.com/f?a=1&amp;b=2|finance>?")
    assert "**" not in text.replace("`keep **this**`", "")
    assert "• totals\n• chart" in text
    assert "`keep **this**`" in text  # code stays as written
    # A link Slack would turn into a mention keeps only its words; HTML stays text.
    assert "<!channel" not in text and "<@" not in text
    assert "ping everyone or them" in text
    assert "&lt;b&gt;not HTML&lt;/b&gt;" in text
