"""A LangGraph-Server-compatible HTTP API over our threads, runs and interrupts."""
