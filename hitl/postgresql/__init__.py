"""Django's PostgreSQL backend, with the pool check of hitl/postgresql/base.py."""
