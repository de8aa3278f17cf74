"""What every command shares: the user-facing error and one-line messages."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from ..errors import ArsError

__all__ = ["USAGE", "CliError", "display_path", "exit_code", "one_line", "printable"]

#: characters a terminal may act on (C0 and C1 controls, DEL); whitespace is handled apart
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with every control character a terminal would act on (an escape
    sequence's ESC, a bell, a C1 control) written as ``\\xNN``: a run name or an
    error message taken from a file never drives the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


#: the exit status of a wrong command line (argparse's); 1 is a failure while running
USAGE = 2


class CliError(Exception):
    """A problem the user can fix; printed as one line, exit status ``code``: 2 when the
    command line itself is wrong (an unknown option or name, a value of the wrong type or
    out of range), 1 when something failed while running (a file, a folder, a package or
    a credential that is missing, a summary that failed)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def exit_code(exc: BaseException) -> int:
    """The exit status of an option value that could not be used: 2 (usage) when the value
    itself is wrong; 1 when building what it names failed on the environment (somewhere in
    the chain of causes, past ARS's own errors and value errors, is a missing package, a
    missing credential, an I/O error...)."""
    cause = exc.__cause__
    while cause is not None:
        if not isinstance(cause, ArsError | ValueError | TypeError | LookupError):
            return 1
        cause = cause.__cause__
    return USAGE


def one_line(exc: BaseException | str) -> str:
    """``exc`` as one line of text (its type name when it has no message)."""
    text = printable(" ".join(str(exc).split()))
    return text or type(exc).__name__


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it is inside it, with a trailing
    separator (it names a folder)."""
    with contextlib.suppress(ValueError):
        return str(path.relative_to(Path.cwd())) + os.sep
    return str(path) + os.sep
