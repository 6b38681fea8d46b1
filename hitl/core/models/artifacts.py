"""Artifacts: the files an agent presented in a thread."""

import uuid

from django.db import models

from hitl.core.models.threads import Thread


class Artifact(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="artifacts")
    # Virtual path, e.g. /mnt/user-data/outputs/report.csv
    path = models.CharField(max_length=500)
    size = models.BigIntegerField(default=0)
    mime = models.CharField(max_length=100, blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["thread", "path"], name="artifact_unique_path"),
        ]

    def __str__(self) -> str:
        return self.path
