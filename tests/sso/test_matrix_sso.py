"""The permission table (docs/permissions.md) for users who signed in through the OIDC provider: each role
that single sign-on can give (outsider, reviewer, `hitl.review_all`, `hitl.run_any_thread`)
plays every HTTP surface of every row, with the session the SSO callback created (pages)
and an API token of the SSO-created user (APIs). The cells must be those of the local
users in tests/permissions/. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass, fields

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.permissions.conftest import World, world_for  # noqa: F401 (the fixture)
from tests.permissions.matrix import expected
from tests.permissions.test_matrix import SURFACES
from tests.sso.conftest import sso_login

# Role -> the IdP user whose groups claim gives it (tests/sso/conftest.py USERS).
SSO_ROLES = {
    "outsider": "oscar.sso",
    "reviewer": "rita.sso",
    "review_all": "vera.sso",
    "run_any_thread": "rex.sso",
}


@dataclass
class SsoWorld(World):
    cookies: object = None

    @property
    def page(self) -> Client:
        """A browser carrying the session cookie the SSO callback set."""
        client = Client()
        client.cookies = self.cookies
        return client


@pytest.fixture
def sso_world_for(sso, world_for):  # noqa: F811
    def build(role: str) -> SsoWorld:
        world = world_for("anonymous")
        browser = Client()
        assert sso_login(browser, SSO_ROLES[role]).status_code == 302
        user = get_user_model().objects.get(username=SSO_ROLES[role])
        values = {f.name: getattr(world, f.name) for f in fields(World)}
        return SsoWorld(**{**values, "role": role, "user": user}, cookies=browser.cookies)

    return build


CASES = [
    pytest.param(action, surface, role, id=f"{action}-{surface}-{role}")
    for action, surfaces in SURFACES.items()
    for surface in surfaces
    for role in SSO_ROLES
]


@pytest.mark.parametrize(("action", "surface", "role"), CASES)
def test_the_documented_cell_holds_for_an_sso_user(action, surface, role, sso_world_for):
    world = sso_world_for(role)
    assert SURFACES[action][surface](world) == expected(action, role)


def test_an_sso_reviewer_removed_at_the_idp_loses_the_interrupt_at_the_next_login(
    sso, sso_world_for
):
    world = sso_world_for("reviewer")
    assert SURFACES["list_interrupt"]["page"](world) == "yes"
    sso.set_groups("rita.sso", [])
    browser = Client()
    sso_login(browser, "rita.sso")
    after = SsoWorld(
        **{f.name: getattr(world, f.name) for f in fields(World)}, cookies=browser.cookies
    )
    assert SURFACES["list_interrupt"]["page"](after) == expected("list_interrupt", "outsider")
    assert SURFACES["answer"]["page"](after) == expected("answer", "outsider")
    assert SURFACES["answer"]["v1"](after) == expected("answer", "outsider")
