"""HITL's models, one module per subject; this index is what the rest of HITL imports.

The app label stays "hitl" (hitl/core/apps.py) and the tables keep their names: the
modules only say where each model is written. Importing them here is what registers
them with Django.
"""

from hitl.core.models.artifacts import Artifact
from hitl.core.models.assistants import Assistant, AssistantVersion, Cron, CronFire
from hitl.core.models.audit import AppendOnly, AuditEvent
from hitl.core.models.claims import InterruptClaim, InterruptSnooze
from hitl.core.models.email_links import EmailActionLink
from hitl.core.models.groups import ReviewerGroupPolicy
from hitl.core.models.interrupts import ExpiryPolicy, HumanInterrupt
from hitl.core.models.ledger import ToolExecution
from hitl.core.models.notify import (
    GroupNotificationSettings,
    InterruptReminder,
    Notification,
    NotificationPreference,
)
from hitl.core.models.policy import Approval, DecisionRule, RuleHit
from hitl.core.models.remote import REMOTE_GRAPH_PREFIX, RemoteDeployment, RemoteThread
from hitl.core.models.runs import Run
from hitl.core.models.slack import SlackMessage, SlackRequestSeen, SlackUserLink
from hitl.core.models.sso import SsoIdentity
from hitl.core.models.threads import Thread
from hitl.core.models.tokens import ApiToken
from hitl.core.models.webhooks import WebhookDelivery

__all__ = [
    "ApiToken",
    "AppendOnly",
    "Approval",
    "Artifact",
    "Assistant",
    "AssistantVersion",
    "AuditEvent",
    "Cron",
    "CronFire",
    "DecisionRule",
    "EmailActionLink",
    "ExpiryPolicy",
    "GroupNotificationSettings",
    "HumanInterrupt",
    "InterruptClaim",
    "InterruptReminder",
    "InterruptSnooze",
    "Notification",
    "NotificationPreference",
    "REMOTE_GRAPH_PREFIX",
    "RemoteDeployment",
    "RemoteThread",
    "ReviewerGroupPolicy",
    "Run",
    "RuleHit",
    "SlackMessage",
    "SlackRequestSeen",
    "SlackUserLink",
    "SsoIdentity",
    "Thread",
    "ToolExecution",
    "WebhookDelivery",
]
