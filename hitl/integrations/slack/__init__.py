"""Slack approvals: Block Kit messages through an incoming webhook, the interactivity
endpoint their buttons call, and updates to the messages once an item they list changes.

The rows are hitl/core/models/slack.py; an answer goes through core's interrupt_answer,
so permissions, four-eyes, undo and the audit trail are the browser's.
"""
