"""Accessibility in real headless Chromium: axe-core on every main page, and the keyboard
paths axe cannot see (skip link, inbox rows reachable with Tab, the selection announced).

axe-core comes from npm (`scripts/ensure-chromium`, run by `make test`, installs it into
var/node/node_modules); Playwright injects it into each page.
"""

from __future__ import annotations

import pytest

from hitl.core.models import HumanInterrupt
from tests.conftest import ROOT, wait_for
from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts

chromium = base.chromium

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

AXE = ROOT / "var" / "node" / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")


@pytest.fixture
def axe_page(chromium, monkeypatch):
    """A page whose CSP lets Playwright inject axe-core (the app's own CSP is unchanged)."""
    if not AXE.exists():
        pytest.fail("axe-core is missing: run `make test` (scripts/ensure-chromium installs it).")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    contexts = []

    def make(base_url: str, username: str | None, viewport=None):
        context = chromium.new_context(
            base_url=base_url, bypass_csp=True, viewport=viewport or {"width": 1280, "height": 900}
        )
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(base.TIMEOUT_MS)
        page.errors = []
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        if username:
            page.goto("/login/")
            page.fill("#id_username", username)
            page.fill("#id_password", f"pw-{username}")
            page.click("button[type=submit]")
            page.wait_for_url(base_url + "/")
        return page

    yield make
    for context in contexts:
        context.close()


def axe_violations(page) -> list[str]:
    """Serious and critical axe-core violations on the page, one line each."""
    page.add_script_tag(path=str(AXE))
    found = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, targets: v.nodes.map(n => n.target.join(' '))}))"
    )
    return [
        f"{v['id']} ({v['impact']}): {', '.join(v['targets'][:6])}"
        for v in found
        if v["impact"] in BLOCKING
    ]


def test_axe_finds_nothing_serious_on_the_main_pages(
    asgi_server, axe_page, reviewer, admin_user, settings
):
    settings.HITL_EXECUTOR = "manual"
    thread, _ = open_interrupts(
        user=reviewer,
        values=[
            human_interrupt("send_email", {"to": "a@b.c", "n": 3, "tags": ["q3"]}),
            human_interrupt("archive", allow_edit=False),
        ],
        title="Accessible thread",
    )
    open_interrupts(
        user=reviewer,
        values=[
            {
                "action_request": {
                    "action": "ask_clarification",
                    "args": {
                        "question": "Which quarter?",
                        "clarification_type": "approach_choice",
                        "options": ["Q2", "Q3"],
                    },
                },
                "config": {"allow_respond": True, "allow_ignore": True},
                "description": None,
            }
        ],
        title="A clarification",
    )
    found: dict[str, list[str]] = {}
    anonymous = axe_page(asgi_server, None)
    anonymous.goto("/login/")
    found["login"] = axe_violations(anonymous)

    rita = axe_page(asgi_server, "rita")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    found["inbox"] = axe_violations(rita)
    rita.goto("/?tab=all")
    found["inbox-threads"] = axe_violations(rita)
    rita.goto(f"/threads/{thread.pk}/")
    rita.wait_for_selector("article.interrupt")
    found["thread"] = axe_violations(rita)
    rita.goto("/threads/new/")
    found["new-thread"] = axe_violations(rita)
    rita.goto("/threads/new/?graph=ticket_triage")
    found["new-thread-form"] = axe_violations(rita)
    rita.click("button.primary")  # every required field empty: inline errors
    rita.wait_for_selector(".start-form .field.invalid")
    found["new-thread-errors"] = axe_violations(rita)
    rita.goto("/threads/00000000-0000-0000-0000-000000000000/")
    found["not-found"] = axe_violations(rita)

    phone = axe_page(asgi_server, "rita", {"width": 390, "height": 844})
    found["inbox-phone"] = axe_violations(phone)

    ada = axe_page(asgi_server, "ada")
    ada.goto("/analytics/")
    found["analytics"] = axe_violations(ada)

    assert {page: lines for page, lines in found.items() if lines} == {}
    assert rita.errors == [] and ada.errors == [] and phone.errors == []


def test_inbox_rows_are_reachable_with_tab_and_the_selection_is_announced(
    asgi_server, axe_page, reviewer, settings
):
    settings.HITL_EXECUTOR = "manual"
    _, (older,) = open_interrupts(user=reviewer, values=[human_interrupt("send_email")])
    _, (newer,) = open_interrupts(
        user=reviewer, values=[human_interrupt("archive", allow_edit=False, allow_respond=False)]
    )
    page = axe_page(asgi_server, "rita")
    page.wait_for_selector("#live-indicator[data-state=live]")

    # The first Tab lands on the skip link, which jumps to the content.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"

    # Tab from the content reaches the rows' links; focusing one selects its row.
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("!!document.activeElement.closest('tr.row')"):
            break
    row_id = page.evaluate("document.activeElement.closest('tr.row').id")
    assert page.get_attribute(f"#{row_id}", "aria-selected") == "true"
    announced = page.inner_text("#inbox-announcer")
    assert "of 2" in announced

    # j / k move the selection and focus, and the live region says where it is.
    page.locator(f"#row-{newer.pk} a.title").focus()
    page.keyboard.press("j")
    assert page.get_attribute(f"#row-{older.pk}", "aria-selected") == "true"
    assert page.get_attribute(f"#row-{newer.pk}", "aria-selected") is None
    wait_for(lambda: "2 of 2" in page.inner_text("#inbox-announcer"), what="announcement")
    assert page.evaluate("document.activeElement.closest('tr.row').id") == f"row-{older.pk}"

    # e / r respect the item's config: the archive request allows neither.
    page.keyboard.press("k")
    page.keyboard.press("e")
    page.wait_for_selector(".toast:has-text('does not allow edit')")
    page.keyboard.press("r")
    page.wait_for_selector(".toast:has-text('does not allow respond')")
    assert "/threads/" not in page.url  # stayed on the inbox
    assert HumanInterrupt.objects.get(pk=newer.pk).status == "pending"
    assert page.errors == []
