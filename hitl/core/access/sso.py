"""Single sign-on: the user an identity provider's claims name, with the groups and
permissions those claims grant (docs/sso.md).

The claims decide at every login: mapped groups and permissions the claims no longer
grant are taken away, so removing someone from the IdP group removes their access at
their next login. Groups and permissions outside the maps are left as an admin set them.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import IntegrityError, transaction
from django.utils import timezone

from hitl.core.models.sso import SsoIdentity

log = logging.getLogger(__name__)

USERNAME_MAX = 150
SUBJECT_MAX = 255  # SsoIdentity.subject


def _text(claims: dict[str, Any], name: str) -> str:
    """A claim that should be a string; anything else counts as absent."""
    value = claims.get(name)
    return value if isinstance(value, str) else ""


def verified_email(claims: dict[str, Any]) -> str:
    """The e-mail claim when the provider says it verified it; else "".

    OpenID Connect Core 5.1: `email_verified` true means the provider took steps to
    ensure the address belongs to the user; false, or no claim at all, means it makes no
    such promise (5.7: the e-mail is not a unique identifier). An unverified address is
    one anybody can type in at some IdPs: stored, it would receive approval links and
    match Slack presses by e-mail. The string "true" counts too (some IdPs send it so).
    """
    verified = claims.get("email_verified")
    if verified is True or (isinstance(verified, str) and verified.lower() == "true"):
        return _text(claims, "email")[:254]
    return ""


def claim_values(claims: dict[str, Any], name: str) -> list[str]:
    """The claim as a list of strings (IdPs send a list, one string, or nothing)."""
    raw = claims.get(name)
    if raw is None:
        return []
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list | tuple):
        return [str(item) for item in raw if isinstance(item, str | int)]
    return []


def _mapped(values: Iterable[str], mapping: Sequence[tuple[str, str]]) -> set[str]:
    held = set(values)
    return {target for value, target in mapping if value in held}


def _free_username(claims: dict[str, Any], username_claim: str, subject: str) -> str:
    User = get_user_model()
    email = verified_email(claims)
    base = str(_text(claims, username_claim) or email.partition("@")[0] or "sso-user")
    base = base[: USERNAME_MAX - 8]
    if not User.objects.filter(username=base).exists():
        return base
    # Taken (a local account or another subject): never adopt it, suffix the subject's hash.
    suffixed = f"{base}-{hashlib.sha256(subject.encode()).hexdigest()[:6]}"
    n = 1
    candidate = suffixed
    while User.objects.filter(username=candidate).exists():
        n += 1
        candidate = f"{suffixed}-{n}"
    return candidate


def _permissions(names: set[str]) -> list[Permission]:
    found = []
    for name in sorted(names):
        app_label, _, codename = name.partition(".")
        perm = Permission.objects.filter(
            content_type__app_label=app_label, codename=codename
        ).first()
        if perm is None:
            log.error("sso: HITL_OIDC_PERMISSION_MAP names %s, which does not exist", name)
            continue
        found.append(perm)
    return found


def _sync_access(
    user,
    values: list[str],
    group_map: Sequence[tuple[str, str]],
    permission_map: Sequence[tuple[str, str]],
) -> None:
    """Give the mapped groups and permissions the claim values grant; take away the rest."""
    managed_groups = {target for _, target in group_map}
    wanted_groups = _mapped(values, group_map)
    current = set(user.groups.filter(name__in=managed_groups).values_list("name", flat=True))
    for name in wanted_groups - current:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    if current - wanted_groups:
        user.groups.remove(*Group.objects.filter(name__in=current - wanted_groups))

    managed_perms = _permissions({target for _, target in permission_map})
    wanted = {p.pk for p in _permissions(_mapped(values, permission_map))}
    keep = [p for p in managed_perms if p.pk in wanted]
    drop = [p for p in managed_perms if p.pk not in wanted]
    if keep:
        user.user_permissions.add(*keep)
    if drop:
        user.user_permissions.remove(*drop)
    if wanted_groups != current:
        log.info(
            "sso: %s groups +%s -%s",
            user.username,
            sorted(wanted_groups - current),
            sorted(current - wanted_groups),
        )


def sso_user_sign_in(
    *,
    issuer: str,
    claims: dict[str, Any],
    groups_claim: str,
    group_map: Sequence[tuple[str, str]],
    permission_map: Sequence[tuple[str, str]],
    username_claim: str = "preferred_username",
):
    """The user for verified claims: found by (issuer, sub) or created; access set from claims."""
    subject = str(claims["sub"])
    values = claim_values(claims, groups_claim)
    User = get_user_model()
    with transaction.atomic():
        identity = (
            SsoIdentity.objects.select_for_update()
            .select_related("user")
            .filter(issuer=issuer, subject=subject)
            .first()
        )
        if identity is None:
            try:
                with transaction.atomic():
                    user = User.objects.create_user(
                        _free_username(claims, username_claim, subject), password=None
                    )
                    identity = SsoIdentity.objects.create(
                        user=user, issuer=issuer, subject=subject, last_login_at=timezone.now()
                    )
            except IntegrityError:
                # The same person's first login twice at once: the other one created it.
                identity = (
                    SsoIdentity.objects.select_for_update()
                    .select_related("user")
                    .get(issuer=issuer, subject=subject)
                )
        user = User.objects.select_for_update().get(pk=identity.user_id)
        fields = {
            # An unverified address is not taken: the one an admin set (or a verified one
            # from an earlier login) stays.
            "email": verified_email(claims) or user.email,
            "first_name": (_text(claims, "given_name") or user.first_name)[:150],
            "last_name": (_text(claims, "family_name") or user.last_name)[:150],
        }
        changed = [name for name, value in fields.items() if getattr(user, name) != value]
        for name in changed:
            setattr(user, name, fields[name])
        if changed:
            user.save(update_fields=changed)
        _sync_access(user, values, group_map, permission_map)
        identity.claim_values = values
        identity.last_login_at = timezone.now()
        identity.save(update_fields=["claim_values", "last_login_at"])
    return user
