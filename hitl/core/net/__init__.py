"""Outbound addresses: which URLs webhooks and remote deployments may reach (a leaf)."""
