"""E-mail approvals' row: one one-click decision link, stored as its token's hash.

Imported by hitl/core/models/__init__.py so the model belongs to the `hitl` app; the
channel's code is in hitl/integrations/email/, the service in core/decisions/email_links.py.
"""

from __future__ import annotations

import hashlib
import uuid

from django.conf import settings
from django.db import models


class EmailActionLink(models.Model):
    """One one-click decision an e-mail offers to one user: short-lived, used once.

    The link's token is a credential (it decides as the user without a login), so only its
    SHA-256 is stored: the row verifies a token, it cannot give one back.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    interrupt = models.ForeignKey(
        "hitl.HumanInterrupt", on_delete=models.CASCADE, related_name="email_links"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    response_type = models.CharField(max_length=10)  # accept | ignore | response
    # Serves the lookup of every opened link: token -> row.
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # the notification sweep: delete links long past their expiry
            models.Index(fields=["expires_at"], name="email_link_expiry"),
        ]

    def __str__(self) -> str:
        return f"{self.response_type} link for {self.user} on {self.interrupt_id}"

    @staticmethod
    def hash_token(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()
