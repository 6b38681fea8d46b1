"""The demo agent: prepare a quarterly sales report and email it, with people in the loop.

The story: asked to prepare and send the sales report, the agent asks which quarter
(approach_choice with options), writes a CSV and a PNG chart into outputs, looks at the
chart, presents both files, asks for approval to send the email (the reviewer may edit
the recipient or the subject), and finishes with a structured final result.

With the default HITL_MODEL ("scripted") a deterministic script drives the same tools a
real model would; set HITL_MODEL=provider:model to let a real model do it.
"""

from __future__ import annotations

import csv
import io
import random
import re
from email.message import EmailMessage
from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import ToolException, tool
from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel, Field

from agents.models import get_model, latest_turn, model_label, reply, tool_results
from agents.paths import FileAccessError
from agents.react import build_react_agent
from agents.tools import require_approval
from agents.tools.base import thread_files

QUARTERS = ["Q1 2025", "Q2 2025", "Q3 2025", "Q4 2025"]
RECIPIENT = "finance-team@example.com"
DEFAULT_REQUEST = "Please prepare the quarterly sales report and send it to the finance team."
REGIONS = ["North", "South", "East", "West"]
_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
_QUARTER = re.compile(r"^Q([1-4]) (20\d\d)$")
EMAIL_PATTERN = r"^[^@\s<>\"']+@[^@\s<>\"']+\.[A-Za-z]{2,}$"
_EMAIL = re.compile(EMAIL_PATTERN)

PROMPT = f"""You prepare sales reports and send them by email, with a person in the loop.
1. Ask which quarter to cover with ask_clarification (clarification_type "approach_choice",
   options {QUARTERS}).
2. write_sales_table for that quarter, then draw_sales_chart from the CSV it wrote.
3. view_image the chart to check it, then present_files the CSV and the PNG.
4. send_email the report to {RECIPIENT} with both files attached (a reviewer approves it).
5. finish with the final result. If a step fails or the reviewer declines, finish anyway
   and say so."""


class ReportResult(BaseModel):
    summary: str = Field(description="One or two sentences for the person.")
    quarter: str | None = Field(None, description="The quarter covered, e.g. 'Q3 2025'.")
    files: list[str] = Field(default_factory=list, description="Presented files.")
    email_sent: bool = Field(False, description="Whether the email went out.")
    recipient: str | None = None
    subject: str | None = None
    reviewer_note: str | None = Field(None, description="What the reviewer said, if anything.")


def _quarter(quarter: str) -> tuple[int, int]:
    match = _QUARTER.match(quarter.strip()) if isinstance(quarter, str) else None
    if not match:
        raise ToolException(f"`quarter` must look like 'Q3 2025'; got {quarter!r}.")
    return int(match[1]), int(match[2])


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "report"


def sales_rows(quarter: str) -> list[dict[str, Any]]:
    """Deterministic demo figures for a quarter."""
    q, year = _quarter(quarter)
    rng = random.Random(f"{year}-Q{q}")
    rows = []
    for month in _MONTHS[(q - 1) * 3 : q * 3]:
        for region in REGIONS:
            units = rng.randint(120, 480)
            rows.append(
                {
                    "month": f"{month} {year}",
                    "region": region,
                    "units": units,
                    "revenue": units * rng.randint(90, 140),
                }
            )
    return rows


@tool("write_sales_table", response_format="content_and_artifact")
def write_sales_table(quarter: str, runtime: ToolRuntime) -> tuple[str, dict[str, Any]]:
    """Write the quarter's sales figures (month, region, units, revenue) as a CSV into outputs."""
    rows = sales_rows(quarter)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=["month", "region", "units", "revenue"])
    writer.writeheader()
    writer.writerows(rows)
    path = f"/mnt/user-data/outputs/sales-{_slug(quarter)}.csv"
    try:
        thread_files(runtime).write_bytes(path, buffer.getvalue().encode())
    except FileAccessError as exc:
        raise ToolException(str(exc)) from None
    total = sum(r["revenue"] for r in rows)
    return (
        f"Wrote {path}: {len(rows)} rows, total revenue ${total:,}.",
        {"path": path, "quarter": quarter, "total_revenue": total},
    )


@tool("draw_sales_chart", response_format="content_and_artifact")
def draw_sales_chart(csv_path: str, runtime: ToolRuntime) -> tuple[str, dict[str, Any]]:
    """Draw a PNG bar chart of revenue by region from a sales CSV; saved next to it in outputs."""
    files = thread_files(runtime)
    if not isinstance(csv_path, str) or not csv_path.lower().endswith(".csv"):
        raise ToolException(
            f"`csv_path` must be a .csv file written by write_sales_table; got {csv_path!r}."
        )
    try:
        text = files.read_bytes(csv_path, max_bytes=1_000_000).decode("utf-8")
        totals: dict[str, int] = {}
        for row in csv.DictReader(io.StringIO(text)):
            totals[row["region"]] = totals.get(row["region"], 0) + int(row["revenue"])
    except FileAccessError as exc:
        raise ToolException(str(exc)) from None
    except (KeyError, ValueError, UnicodeDecodeError):
        raise ToolException(
            f"{csv_path} is not a sales table (month, region, units, revenue)."
        ) from None
    if not totals:
        raise ToolException(f"{csv_path} has no rows to chart.")
    title = csv_path.rsplit("/", 1)[-1].removesuffix(".csv").replace("-", " ").capitalize()
    png = _bar_chart(title, totals)
    path = csv_path[: -len(".csv")] + "-chart.png"
    try:
        files.write_bytes(path, png)
    except FileAccessError as exc:
        raise ToolException(str(exc)) from None
    return f"Wrote {path} ({len(png)} bytes).", {"path": path, "totals": totals}


def _bar_chart(title: str, totals: dict[str, int]) -> bytes:
    from PIL import Image, ImageDraw, ImageFont

    width, height, margin = 640, 400, 50
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    draw.text(
        (margin, 12),
        f"{title}: revenue by region",
        fill="black",
        font=ImageFont.load_default(size=20),
    )
    top = max(totals.values())
    slot = (width - 2 * margin) // len(totals)
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"]
    for i, (region, value) in enumerate(totals.items()):
        x0 = margin + i * slot + slot // 6
        x1 = margin + (i + 1) * slot - slot // 6
        y0 = height - margin - int((height - 2 * margin - 20) * value / top)
        draw.rectangle([x0, y0, x1, height - margin], fill=colors[i % len(colors)])
        draw.text((x0, height - margin + 8), region, fill="black")
        draw.text((x0, y0 - 14), f"${value:,}", fill="black")
    draw.line([margin, height - margin, width - margin, height - margin], fill="black")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


@tool("send_email", response_format="content_and_artifact")
def send_email(
    to: Annotated[
        str, Field(pattern=EMAIL_PATTERN, description="The recipient, like name@example.com.")
    ],
    subject: Annotated[str, Field(min_length=1)],
    body: str,
    runtime: ToolRuntime,
    attachments: list[str] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Email the report. Needs a reviewer's approval before it runs."""
    if not _EMAIL.match(to or ""):
        raise ToolException(f"{to!r} is not an email address.")
    if not subject.strip():
        raise ToolException("The subject must not be empty.")
    files = thread_files(runtime)
    message = EmailMessage()
    message["To"], message["From"], message["Subject"] = to, "hitl-demo@example.com", subject
    message.set_content(body)
    try:
        for path in attachments or []:
            data = files.read_bytes(path, max_bytes=10_000_000)
            maintype, subtype = ("image", "png") if path.endswith(".png") else ("text", "csv")
            message.add_attachment(
                data, maintype=maintype, subtype=subtype, filename=path.rsplit("/", 1)[-1]
            )
        outbox = f"/mnt/user-data/workspace/outbox/{_slug(subject)}.eml"
        files.write_bytes(outbox, message.as_bytes())
    except FileAccessError as exc:
        raise ToolException(str(exc)) from None
    # The demo has no mail server: "sending" puts the message in the thread's outbox.
    return (
        f"Email to {to} with subject {subject!r} and {len(attachments or [])} attachment(s) "
        f"delivered to the demo outbox ({outbox}); no mail server is configured.",
        {"sent": True, "to": to, "subject": subject, "outbox": outbox},
    )


for _tool in (write_sales_table, draw_sales_chart, send_email):
    _tool.handle_tool_error = True

send_email_with_approval = require_approval(
    send_email,
    editable=("to", "subject"),
    description=(
        "The agent wants to **send an email** to {to} with the subject *{subject}*. "
        "You may edit the recipient or the subject before it goes out."
    ),
)

# --- the script the offline model follows ------------------------------------------

_WORDS = {
    "first": 1,
    "1st": 1,
    "second": 2,
    "2nd": 2,
    "third": 3,
    "3rd": 3,
    "fourth": 4,
    "4th": 4,
    "last": 4,
}


def parse_quarter(answer: str, default: str) -> str | None:
    """The quarter named in a free-text answer ("Q3", "third quarter 2024"), if any."""
    text = answer.lower()
    match = re.search(r"\bq\s*([1-4])\b", text)
    number = (
        int(match[1])
        if match
        else next((n for w, n in _WORDS.items() if re.search(rf"\b{w}\b", text)), None)
    )
    if number is None:
        return None
    year = re.search(r"\b(20\d\d)\b", text)
    return f"Q{number} {year[1] if year else default.split()[1]}"


def _finish(summary: str, **fields: Any) -> AIMessage:
    return reply(summary, ("finish", {"summary": summary, **fields}))


def demo_script(messages: list[BaseMessage], tools: list[str]) -> AIMessage:
    results = tool_results(messages)
    turn = latest_turn(messages)
    last = turn[-1] if turn else None
    if "finish" in results:
        return reply("The report task is done.")
    if isinstance(last, ToolMessage) and last.status == "error":
        return _finish(f"Stopped: the {last.name} step failed ({last.text[:300]}).")

    clarified = results.get("ask_clarification")
    if clarified is None:
        return reply(
            "Before I build the report I need to know which quarter it should cover.",
            (
                "ask_clarification",
                {
                    "question": "Which quarter should the sales report cover?",
                    "clarification_type": "approach_choice",
                    "context": "I have sales figures for every quarter of 2025.",
                    "options": QUARTERS,
                },
            ),
        )
    answered = (clarified.artifact or {}).get("answered")
    quarter = (parse_quarter(clarified.text, QUARTERS[-1]) if answered else None) or QUARTERS[-1]
    assumed = (
        ""
        if answered and parse_quarter(clarified.text, QUARTERS[-1])
        else (f" No quarter was given, so I use the most recent one, {quarter}.")
    )

    table = results.get("write_sales_table")
    if table is None:
        return reply(
            f"Building the sales table for {quarter}.{assumed}",
            ("write_sales_table", {"quarter": quarter}),
        )
    csv_path = table.artifact["path"]

    chart = results.get("draw_sales_chart")
    if chart is None:
        return reply(
            "Now a chart of revenue by region.", ("draw_sales_chart", {"csv_path": csv_path})
        )
    png_path = chart.artifact["path"]

    if "view_image" not in results:
        return reply(
            "Let me look at the chart before it goes out.", ("view_image", {"image_path": png_path})
        )
    if "present_files" not in results:
        return reply(
            "The report is ready; here are the files.",
            ("present_files", {"filepaths": [csv_path, png_path]}),
        )

    subject = f"Sales report {quarter}"
    email = results.get("send_email")
    if email is None:
        total = table.artifact.get("total_revenue", 0)
        return reply(
            f"Asking for approval to email the report to {RECIPIENT}.",
            (
                "send_email",
                {
                    "to": RECIPIENT,
                    "subject": subject,
                    "body": f"Hello,\n\nattached are the sales figures for {quarter} "
                    f"(total revenue ${total:,}) and a chart by region.\n\nThe HITL demo agent",
                    "attachments": [csv_path, png_path],
                },
            ),
        )
    files = [csv_path, png_path]
    outcome = email.artifact or {}
    if outcome.get("sent"):
        return _finish(
            f"Sent the {quarter} sales report to {outcome['to']}.",
            quarter=quarter,
            files=files,
            email_sent=True,
            recipient=outcome["to"],
            subject=outcome["subject"],
        )
    note = email.text if outcome.get("review") == "response" else None
    return _finish(
        f"Prepared the {quarter} sales report; the email was not sent"
        + (" (the reviewer replied instead)." if note else " (the reviewer skipped it)."),
        quarter=quarter,
        files=files,
        email_sent=False,
        reviewer_note=note,
    )


def build_demo_agent(model: Any = None, *, checkpointer: Any = None):
    return build_react_agent(
        model if model is not None else get_model(script=demo_script),
        [write_sales_table, draw_sales_chart, send_email_with_approval],
        prompt=PROMPT,
        response_format=ReportResult,
        reviewer_groups=["reviewers", "finance"],
        default_request=DEFAULT_REQUEST,
        name="demo",
        checkpointer=checkpointer,
    )


_model = get_model(script=demo_script)
demo_graph = build_demo_agent(_model)
MODEL_LABEL = model_label(_model)  # "scripted demo model" unless HITL_MODEL names a real one
