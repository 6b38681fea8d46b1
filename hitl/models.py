import hashlib
import secrets
import uuid

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q


class ThreadQuerySet(models.QuerySet):
    def for_requester(self, user):
        return self.filter(requester=user)


class Thread(models.Model):
    class Status(models.TextChoices):
        IDLE = "idle"
        BUSY = "busy"
        INTERRUPTED = "interrupted"
        ERROR = "error"
        DONE = "done"

    # Also the LangGraph thread_id of the checkpointer.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    graph = models.CharField(max_length=100)
    title = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IDLE)
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="threads"
    )
    reviewer_group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ThreadQuerySet.as_manager()

    class Meta:
        indexes = [
            # inbox tabs by status, newest first
            models.Index(fields=["status", "-updated_at"], name="thread_status_updated"),
            # "my threads" for requesters
            models.Index(fields=["requester", "-updated_at"], name="thread_requester_updated"),
            # all threads, newest first (keyset pagination)
            models.Index(fields=["-updated_at", "id"], name="thread_updated"),
        ]

    def __str__(self) -> str:
        return self.title or str(self.id)


class RunQuerySet(models.QuerySet):
    def active(self):
        return self.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING])


class Run(models.Model):
    class Kind(models.TextChoices):
        START = "start"
        RESUME = "resume"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        INTERRUPTED = "interrupted"
        SUCCESS = "success"
        ERROR = "error"
        CANCELLED = "cancelled"

    TERMINAL = (Status.INTERRUPTED, Status.SUCCESS, Status.ERROR, Status.CANCELLED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="runs")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED)
    # start: the graph input; resume: {"resume": {interrupt_id: value}}.
    input = models.JSONField(default=dict, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        indexes = [
            # a thread's run history, latest first
            models.Index(fields=["thread", "-created_at"], name="run_thread_created"),
            # the reaper: running runs whose lease expired
            models.Index(fields=["status", "lease_expires_at"], name="run_status_lease"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} run {self.id}"

    @property
    def duration(self):
        if self.started_at and self.finished_at:
            return self.finished_at - self.started_at
        return None


class HumanInterruptQuerySet(models.QuerySet):
    def pending(self):
        return self.filter(status=HumanInterrupt.Status.PENDING)

    def for_reviewer(self, user):
        if user.is_superuser or user.has_perm("hitl.review_all"):
            return self
        return self.filter(reviewer_group__in=user.groups.all())


class HumanInterrupt(models.Model):
    """One action awaiting a person; a LangGraph interrupt with N requests has N rows."""

    class Kind(models.TextChoices):
        HUMAN_INTERRUPT = "human_interrupt"  # one Agent Inbox HumanInterrupt dict
        HUMAN_INTERRUPT_LIST = "human_interrupt_list"  # a list of them
        HITL_REQUEST = "hitl_request"  # langchain HumanInTheLoopMiddleware, batched
        TOOL_APPROVAL = "tool_approval"  # langchain HumanInTheLoopMiddleware, per call
        RAW = "raw"  # any other JSON value

    class Status(models.TextChoices):
        PENDING = "pending"
        RESOLVED = "resolved"
        EXPIRED = "expired"
        CANCELLED = "cancelled"

    class ResponseType(models.TextChoices):
        ACCEPT = "accept"
        IGNORE = "ignore"
        RESPONSE = "response"
        EDIT = "edit"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="interrupts")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="interrupts")
    interrupt_id = models.CharField(max_length=128)
    # Position of this request inside the interrupt value (lists, batched middleware).
    position = models.PositiveSmallIntegerField(default=0)
    kind = models.CharField(max_length=24, choices=Kind.choices)
    raw_value = models.JSONField(null=True, blank=True)
    response_schema = models.JSONField(null=True, blank=True)
    action = models.CharField(max_length=200, blank=True)
    args = models.JSONField(default=dict, blank=True)
    args_schema = models.JSONField(null=True, blank=True)
    description = models.TextField(blank=True)
    allow_accept = models.BooleanField(default=False)
    allow_edit = models.BooleanField(default=False)
    allow_respond = models.BooleanField(default=False)
    allow_ignore = models.BooleanField(default=False)
    reviewer_group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    response_type = models.CharField(max_length=10, choices=ResponseType.choices, blank=True)
    response_args = models.JSONField(null=True, blank=True)
    responded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    responded_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = HumanInterruptQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "interrupt_id", "position"], name="interrupt_unique_per_thread"
            ),
        ]
        indexes = [
            # reviewer inbox: pending items of my groups, newest first
            models.Index(
                fields=["status", "reviewer_group", "-created_at"], name="interrupt_inbox"
            ),
            # "all pending", newest first, for review_all reviewers
            models.Index(fields=["status", "-created_at"], name="interrupt_status_created"),
            # expiry sweep
            models.Index(
                fields=["expires_at"], name="interrupt_expiry", condition=Q(status="pending")
            ),
        ]
        permissions = [("review_all", "Can review interrupts of every reviewer group")]

    def __str__(self) -> str:
        return f"{self.action or self.kind} ({self.status})"

    @property
    def allowed_types(self) -> list[str]:
        flags = [
            (self.allow_accept, "accept"),
            (self.allow_edit, "edit"),
            (self.allow_respond, "response"),
            (self.allow_ignore, "ignore"),
        ]
        return [name for allowed, name in flags if allowed]


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


class ApiToken(models.Model):
    """A per-user API token; only its SHA-256 is stored."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=8)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @staticmethod
    def hash_key(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def issue(cls, *, user, name: str = "") -> tuple["ApiToken", str]:
        key = "hitl_" + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, name=name, prefix=key[5:13], key_hash=cls.hash_key(key))
        return token, key
