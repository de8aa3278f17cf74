"""LlamaIndex adapter for ARS context compression.

Provides a chat memory (``BaseMemory``) for LlamaIndex agents and chat engines.
Install with ``pip install "ars[llamaindex]"``.
"""

__all__: list[str] = []
