"""E-mail approvals: the notification mail (text and HTML) with one-click decision links,
their confirmation page, and the SMTP send.

The links' state changes (mint, use, undo) are core's, hitl/core/decisions/email_links.py;
the row is hitl/core/models/email_links.py.
"""
