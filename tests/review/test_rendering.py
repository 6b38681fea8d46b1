"""Markdown is sanitized; tool arguments become typed fields."""

from hitl.review.rendering import arg_fields, csv_preview, markdown
from tests.review.conftest import dangerous_markup, live_markup


def test_markdown_keeps_formatting():
    html = str(markdown("Send **now** to `ops`\n\n- one\n- two\n\n[docs](https://example.com)"))
    assert "<strong>now</strong>" in html
    assert "<code>ops</code>" in html
    assert "<li>one</li>" in html
    assert 'href="https://example.com"' in html
    assert 'rel="noopener noreferrer nofollow"' in html


def test_markdown_renders_raw_html_and_handlers_inert():
    html = str(
        markdown(
            "<script>alert(1)</script> <img src=x onerror=alert(2)> "
            '<a href="javascript:alert(3)" onclick="alert(4)">x</a> [y](javascript:alert(5))'
        )
    )
    assert dangerous_markup(html) == []
    assert [tag for tag, _ in live_markup(html)] == ["p"]  # the raw HTML is shown as text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_markdown_drops_disallowed_urls_from_markdown_links():
    html = str(markdown("[click](javascript:alert(1)) [data](data:text/html,hi)"))
    assert dangerous_markup(html) == []
    assert [tag for tag, _ in live_markup(html)] == ["p"]


def test_arg_fields_follow_value_types_without_a_schema():
    fields = {
        f.key: f for f in arg_fields({"to": "a", "n": 2, "x": 1.5, "ok": True, "l": [1]}, None)
    }
    assert fields["to"].widget == "string"
    assert fields["n"].widget == "integer"
    assert fields["x"].widget == "number"
    assert fields["ok"].widget == "boolean"
    assert fields["l"].widget == "json"


def test_arg_fields_follow_the_schema_and_lock_pinned_arguments():
    schema = {
        "type": "object",
        "properties": {
            "to": {"type": "string"},
            "priority": {"enum": ["low", "high"]},
            "body": {"const": "fixed"},
            "cc": {"type": ["string", "null"]},
            "secret": False,
        },
        "required": ["to"],
    }
    fields = {f.key: f for f in arg_fields({"to": "a", "priority": "low", "body": "fixed"}, schema)}
    assert fields["to"].required and fields["to"].widget == "string"
    assert fields["priority"].widget == "choice"
    assert fields["body"].locked
    assert fields["cc"].widget == "string" and not fields["cc"].present
    assert "secret" not in fields


def test_csv_preview_reads_header_and_rows():
    preview = csv_preview(b"a,b\n1,2\n3,4\n")
    assert preview["header"] == ["a", "b"]
    assert preview["rows"] == [["1", "2"], ["3", "4"]]
    assert not preview["truncated"]
