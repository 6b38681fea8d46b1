"""A thread's past: its checkpoint history, its branches, and forking from any step."""
