"""The ``ars`` command: see what ARS would do to recorded agent runs.

::

    ars replay [RUN ...] [--threshold K] [--keep N] [--tool-limit T] [--ratio R]
               [--estimator NAME] [--summarizer NAME] [--out DIR] [--plot FILE.png] [--json]
    ars estimate [FILE ...] [--json]
    ars plugins

``ars replay`` reads recorded runs (OpenAI chat-completions JSON / JSONL, gzip
too; a folder means every run in it) and replays each one call by call through
the replay library (:mod:`ars_core.replay`): real files written under ``--out``,
the recorded reply standing in for the model. With no ``RUN`` it replays the
sample runs shipped in ``ars_core/data/`` with the built-in extractive
summarizer: no model, no API key, no download.

``ars estimate`` counts the tokens of transcripts with every available
estimator and shows how far they disagree. ``ars plugins`` lists the
registered plugins (JSON), as ``llm plugins`` does.

Bad input prints one line on stderr and exits 2 when the command line is wrong
(an unknown option or name, a value of the wrong type or out of range) and 1
when something fails while running (an unreadable file, something that is not a
chat transcript, an orphan tool message, a missing package); set ``ARS_DEBUG=1``
to get the traceback instead.

Modules: :mod:`.parser` (argparse), :mod:`.commands` (what each command does),
:mod:`.components` (estimators and summarizers by name), :mod:`.report` (text
output), :mod:`.plot` (matplotlib).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence

from ..errors import ArsError
from .commands import cmd_estimate, cmd_plugins, cmd_replay
from .common import CliError, one_line
from .parser import build_parser

__all__ = ["CliError", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ars`` console script; returns the exit status."""
    parser = build_parser()
    debug = os.environ.get("ARS_DEBUG", "") not in ("", "0")
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        command = {"replay": cmd_replay, "estimate": cmd_estimate, "plugins": cmd_plugins}
        return command[args.command](args, sys.stdout)
    except CliError as exc:
        if debug:
            raise
        print(f"ars: error: {exc}", file=sys.stderr)
        return exc.code
    except ArsError as exc:  # MessageFormatError, ConfigError, PathBoundaryError...
        if debug:
            raise
        print(f"ars: error: {one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ars: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        with contextlib.suppress(Exception):
            sys.stdout = open(os.devnull, "w")
        return 1
    except Exception as exc:
        if debug:
            raise
        print(
            f"ars: internal error: {type(exc).__name__}: {one_line(exc)} "
            "(set ARS_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 70
