"""LangChain / LangGraph adapter for ARS context compression.

Provides an ``AgentMiddleware`` for ``create_agent`` / LangGraph graphs (and
deepagents). Install with ``pip install "ars[langchain]"``.
"""

__all__: list[str] = []
