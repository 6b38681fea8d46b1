from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from hitl.core.models import ApiToken


class Command(BaseCommand):
    help = "Issue an API token for a user and print it once."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="")

    def handle(self, *args, username, name, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        _, key = ApiToken.issue(user=user, name=name)
        self.stdout.write(key)
