"""Create (or update) a reviewer in a reviewer group, optionally with an API token."""

import os

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from hitl.core.models import ApiToken

PASSWORD_ENV = "HITL_REVIEWER_PASSWORD"


class Command(BaseCommand):
    help = (
        "Create a reviewer (or add an existing user) in a reviewer group. The password is "
        f"read from ${PASSWORD_ENV} when set; --token prints a new API token."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "--group",
            action="append",
            required=True,
            help="Reviewer group (a Django group; created when missing). Repeatable.",
        )
        parser.add_argument("--token", action="store_true", help="Issue and print an API token.")

    def handle(self, *args, username: str, group: list[str], token: bool, **options):
        username = username.strip()
        names = [g.strip() for g in group if g.strip()]
        if not username or len(username) > 150:
            raise CommandError("Give a username of 1 to 150 characters.")
        if not names:
            raise CommandError("Give at least one --group.")
        password = os.environ.get(PASSWORD_ENV, "")
        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(username=username)
            if password:
                user.set_password(password)
            elif created:
                user.set_unusable_password()  # API tokens only, until a password is set
            user.save()
            groups = [Group.objects.get_or_create(name=name)[0] for name in names]
            user.groups.add(*groups)
            key = ApiToken.issue(user=user, name="create_reviewer")[1] if token else None
        verb = "Created" if created else "Updated"
        self.stdout.write(f"{verb} reviewer {username} in {', '.join(names)}.")
        if not password and created:
            self.stdout.write(
                f"No password set (set ${PASSWORD_ENV}, or run manage.py changepassword "
                f"{username}) for the browser."
            )
        if key:
            self.stdout.write(f"API token: {key}")
