"""Patches to, and reads of, other projects' internals: each in one module here.

Every module names the version it was written against, and tests/compat pins that
version, so an upgrade fails loudly there instead of quietly somewhere else. A leaf:
nothing here imports HITL.
"""
