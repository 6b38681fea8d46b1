"""Review agents that run on another LangGraph-compatible deployment.

Beat polls each RemoteDeployment for interrupted threads (`mirror`); each pending
interrupt becomes HumanInterrupt rows made by the same code as a local pause
(`run_finish`), so rules, four-eyes, claims, notifications and audit apply. Decisions
queue a resume run as for a local thread; the worker hands it to `deliver`, which
resumes the remote thread through its API.
"""
