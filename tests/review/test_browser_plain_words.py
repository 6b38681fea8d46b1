"""Issue 28 in real Chromium: what a page says is so when it is read. Admin's labels are
spelled right, the new-thread page says what each graph does and offers only its inputs,
an undo promise goes when the grace period ends, and a dry-run rule's opinion is on the
card."""

from __future__ import annotations

import re

import pytest
from django.apps import apps

from hitl.core import decisions
from hitl.core.models import DecisionRule
from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts

chromium = base.chromium
browser_page = base.browser_page


def plural(words: str) -> str:
    """English plural of a label's last word (the cases model names meet)."""
    if re.search(r"[^aeiou]y$", words):
        return words[:-1] + "ies"
    if re.search(r"(s|x|z|ch|sh)$", words):
        return words + "es"
    return words + "s"


def test_every_model_label_has_an_english_plural():
    for model in apps.get_app_config("hitl").get_models():
        meta = model._meta
        if meta.verbose_name_plural == meta.verbose_name:
            continue  # a label that is plural already ("reviewer group notifications")
        assert meta.verbose_name_plural == plural(str(meta.verbose_name)), model.__name__


@pytest.mark.postgres
@pytest.mark.browser
def test_admin_spells_its_labels_right(asgi_server, browser_page, admin_user):
    page = browser_page(asgi_server, admin_user.username)
    page.goto("/admin/")
    index = page.inner_text("#content-main")
    assert "Reviewer group policies" in index and "Webhook deliveries" in index
    assert "API tokens" in index
    assert not re.search(r"policys|deliverys|seens\b", index, re.IGNORECASE)
    assert page.errors == []


@pytest.mark.postgres
@pytest.mark.browser
def test_the_new_thread_page_describes_the_graph_and_offers_only_its_inputs(
    asgi_server, browser_page, reviewer
):
    page = browser_page(asgi_server, "rita")
    page.goto("/threads/new/?graph=demo")
    page.wait_for_selector("#start-form-fields[data-graph=demo]")
    assert page.inner_text("#graph-description").startswith(
        "The demo agent: prepare a quarterly sales report and email it"
    )
    keys = page.eval_on_selector_all(
        "#start-form-fields [data-key]", "els => els.map(e => e.dataset.key)"
    )
    assert "request" in keys and "messages" in keys
    # What the agent writes is not asked for.
    assert not {"artifacts", "viewed_images", "final_result"} & set(keys)

    # Another graph: its own description, fetched with its fields.
    page.select_option("#id_graph", "approval")
    page.wait_for_selector("#start-form-fields[data-graph=approval]")
    assert page.inner_text("#graph-description").startswith("Asks a reviewer to approve one email")
    assert page.errors == []


def test_the_agent_input_schema_leaves_out_what_it_only_writes(settings):
    from agents.schema import input_schema, state_schema
    from hitl.core.registry import registry

    graph = registry.get("demo", None)
    assert {"artifacts", "viewed_images", "final_result"} <= set(state_schema(graph)["properties"])
    assert not {"artifacts", "viewed_images", "final_result"} & set(
        input_schema(graph)["properties"]
    )


@pytest.mark.postgres
@pytest.mark.browser
def test_they_can_still_undo_it_goes_when_the_grace_period_ends(
    asgi_server, browser_page, reviewer, second_reviewer, settings
):
    settings.HITL_EXECUTOR = "manual"
    thread, (row,) = open_interrupts(user=reviewer, values=[human_interrupt()], title="One ask")
    rita = browser_page(asgi_server, "rita")
    rita.goto(f"/threads/{thread.pk}/")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    decisions.interrupt_resolve(
        interrupt_id=row.pk, user=second_reviewer, response_type="accept", grace=3
    )
    line = f'#interrupt-{row.pk} .outcome[data-outcome="{row.pk}"] .outcome-line'
    assert "they can still undo it" in rita.wait_for_selector(line).inner_text()
    # When the grace period is over the page no longer promises it.
    rita.wait_for_function(
        "sel => !document.querySelector(sel).textContent.includes('still undo')", arg=line
    )
    assert rita.inner_text(line).startswith("sam accepted it as proposed")
    assert rita.errors == []


@pytest.mark.postgres
@pytest.mark.browser
def test_a_dry_run_rules_opinion_is_on_the_card(asgi_server, browser_page, reviewer, settings):
    settings.HITL_EXECUTOR = "manual"
    DecisionRule.objects.create(
        name="internal-mail",
        outcome="accept",
        action="send_email",
        condition='args.to.endsWith("@ourcompany.com")',
        mode="dry_run",
    )
    thread, (internal, external) = open_interrupts(
        user=reviewer,
        values=[
            human_interrupt("send_email", {"to": "ann@ourcompany.com"}),
            human_interrupt("send_email", {"to": "bob@example.com"}),
        ],
    )
    rita = browser_page(asgi_server, "rita")
    rita.goto(f"/threads/{thread.pk}/")
    opinion = rita.inner_text(f"#interrupt-{internal.pk} .rule-opinion")
    assert opinion == "Rule internal-mail v1 would have accepted this. (dry run)"
    assert rita.query_selector(f"#interrupt-{external.pk} .rule-opinion") is None
    # Nothing was decided: the rule only records.
    assert internal.__class__.objects.get(pk=internal.pk).status == "pending"
    assert rita.errors == []
