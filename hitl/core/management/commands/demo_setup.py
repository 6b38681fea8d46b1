"""Create the demo reviewer (and the default reviewer group) and print how to log in."""

import os
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.utils.crypto import get_random_string

from hitl.core.access.permissions import default_reviewer_group
from hitl.core.models import ApiToken


class Command(BaseCommand):
    help = "Create or refresh the demo reviewer account and print its credentials."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="reviewer")
        parser.add_argument(
            "--token-file", default="", help="Write a fresh API token to this file."
        )

    def handle(self, *args, username, token_file, **options):
        group = default_reviewer_group()
        user, _ = get_user_model().objects.get_or_create(
            username=username, defaults={"is_staff": True}
        )
        password = get_random_string(12)
        user.set_password(password)
        user.is_staff = True
        user.is_superuser = True
        user.save()
        user.groups.add(group)
        key = _demo_token(user)
        if token_file:
            with open(token_file, "w") as fh:
                fh.write(key)
        url = f"http://{settings.HITL_HOST}:{settings.HITL_PORT}/"
        self.stdout.write(
            f"\n  HITL is starting at {url}\n"
            f"  Demo reviewer: {username} / {password}  (group {group.name!r})\n"
            f"  API token:     {key}\n"
        )


def _demo_token(user) -> str:
    """The demo token kept under var/ (like the secret key), issued again only when its
    row is gone: `make run` does not mint a new token every time."""
    path = Path(settings.VAR_DIR) / "demo_token"
    if path.exists():
        key = path.read_text().strip()
        if ApiToken.objects.filter(user=user, key_hash=ApiToken.hash_key(key)).exists():
            return key
    _, key = ApiToken.issue(user=user, name="demo")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key)
    return key
