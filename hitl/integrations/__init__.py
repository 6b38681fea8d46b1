"""One package per channel a decision can come from outside the browser (as healthchecks'
hc/integrations/<channel>/): each owns its URLs, views, transport, message rendering, admin
and tests. The channel-neutral code (the answer service, the audit, the notification
outbox in hitl/ops/notifications.py) names a channel only as data."""
