"""Where ARS writes: the output folders, in one place.

Every file ARS writes is under one of these virtual folders (relative,
``/``-separated; a :class:`~ars_core.FileBackend` maps them onto its storage,
scoped per conversation thread):

=====================================  =================================================
folder                                 what it holds (written by)
=====================================  =================================================
``outputs/large_tool_results``         tool results offloaded by L1 (:mod:`ars_core.l1`)
``outputs/large_user_messages``        user messages above the entry threshold
                                       (:mod:`ars_core.l1`)
``outputs/media``                      inline images, audio and documents of answered
                                       messages (:mod:`ars_core.l1_media`)
``outputs/conversation_history``       the lossless archive of summarized history
                                       (:mod:`ars_core.archive`)
``outputs/trimmed_messages``           originals of kept messages trimmed under a context
                                       overflow (:mod:`ars_core.l2`)
=====================================  =================================================

:data:`OUTPUT_FOLDERS` lists all five; an adapter that points the agent's own
file tools at a thread's files (``ars_langchain.backends``) routes exactly
these.
"""

from __future__ import annotations

__all__ = [
    "HISTORY_DIR",
    "LARGE_TOOL_RESULTS_DIR",
    "LARGE_USER_MESSAGES_DIR",
    "MEDIA_DIR",
    "OUTPUTS_ROOT",
    "OUTPUT_FOLDERS",
    "TRIMMED_DIR",
    "output_folder",
]

#: the folder every output folder is in
OUTPUTS_ROOT = "outputs"
#: where offloaded tool results go
LARGE_TOOL_RESULTS_DIR = f"{OUTPUTS_ROOT}/large_tool_results"
#: where user messages larger than the entry threshold go
LARGE_USER_MESSAGES_DIR = f"{OUTPUTS_ROOT}/large_user_messages"
#: where inline media of the view go
MEDIA_DIR = f"{OUTPUTS_ROOT}/media"
#: where archived history goes
HISTORY_DIR = f"{OUTPUTS_ROOT}/conversation_history"
#: where the originals of tail messages trimmed under overflow go
TRIMMED_DIR = f"{OUTPUTS_ROOT}/trimmed_messages"

#: every folder ARS writes
OUTPUT_FOLDERS: tuple[str, ...] = (
    LARGE_TOOL_RESULTS_DIR,
    LARGE_USER_MESSAGES_DIR,
    MEDIA_DIR,
    HISTORY_DIR,
    TRIMMED_DIR,
)


def output_folder(path: str) -> str | None:
    """The output folder ``path`` (virtual, a leading ``/`` allowed) is in or
    names, or ``None`` when it is outside them."""
    norm = path.strip().lstrip("/")
    for folder in OUTPUT_FOLDERS:
        if norm == folder or norm.startswith(folder + "/"):
            return folder
    return None
