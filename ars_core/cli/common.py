"""What every command shares: the user-facing error and one-line messages."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["CliError", "display_path", "one_line"]


class CliError(Exception):
    """A problem the user can fix; printed as one line, exit status ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def one_line(exc: BaseException | str) -> str:
    """``exc`` as one line of text (its type name when it has no message)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it is inside it, with a trailing
    separator (it names a folder)."""
    with contextlib.suppress(ValueError):
        return str(path.relative_to(Path.cwd())) + os.sep
    return str(path) + os.sep
