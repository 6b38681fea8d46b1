"""LangGraph side of HITL: graphs, tools, the interrupt contract. No Django imports."""
