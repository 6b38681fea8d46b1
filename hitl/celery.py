"""The Celery app: settings come from Django settings with the CELERY_ prefix."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl.settings")

app = Celery("hitl")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Task modules are listed in settings.CELERY_IMPORTS.
