"""LangGraph Server's resources beside threads and runs: assistants, crons and the store."""
