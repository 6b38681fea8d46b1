"""Who a user is at the company's identity provider (single sign-on, docs/sso.md).

Imported by hitl/core/models/__init__.py so the model belongs to the `hitl` app.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SsoIdentity(models.Model):
    """One user's subject at one OpenID Connect issuer: the stable key of an SSO login.

    Users are found by (issuer, subject), never by e-mail or username, which an IdP may let
    people change or reuse.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identities"
    )
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    # The values of the groups claim at the last login (what groups were set from).
    claim_values = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_login_at = models.DateTimeField()

    class Meta:
        verbose_name = "SSO identity"
        verbose_name_plural = "SSO identities"
        constraints = [
            # Serves the lookup at every login: (issuer, subject) -> user.
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_once"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} @ {self.issuer}"
