"""API tokens: a user's keys for the JSON APIs, stored only as their SHA-256."""

import hashlib
import secrets

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A per-user API token; only its SHA-256 is stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=8)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @staticmethod
    def hash_key(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def issue(cls, *, user, name: str = "") -> tuple["ApiToken", str]:
        key = "hitl_" + secrets.token_urlsafe(32)
        token = cls.objects.create(
            user=user, name=name, prefix=key[5:13], key_hash=cls.hash_key(key)
        )
        return token, key
