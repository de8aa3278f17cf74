"""The ``ars`` command line (argparse)."""

from __future__ import annotations

import argparse
from typing import NoReturn

from .. import __version__
from ..config import DEFAULT_THRESHOLD_K, SummaryConfig
from ..replay import DEMO_THRESHOLD
from .common import USAGE, CliError

__all__ = ["build_parser"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``ars replay: error: ...``)."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see '{self.prog} --help')", USAGE)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every ``ars`` command."""
    parser = _Parser(
        prog="ars",
        description="ARS context compression: replay recorded agent runs through ARS, "
        "count tokens.",
    )
    parser.add_argument("--version", action="version", version=f"ars {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_replay(sub)
    _add_estimate(sub)
    sub.add_parser(
        "plugins",
        help="list the registered plugins as JSON",
        description="Every plugin ARS has registered (built-ins, the adapters' and third-party "
        "plugins from the 'ars' entry-point group, limited by ARS_PLUGINS): where it came from, "
        "the hooks it implements and the components it registers, as JSON. A plugin whose "
        "import fails (a package it needs is not installed) is left out, with one line on "
        "stderr saying why.",
    )
    return parser


def _add_replay(sub: argparse._SubParsersAction[_Parser]) -> None:
    rp = sub.add_parser(
        "replay",
        help="replay recorded runs through ARS and report what it did",
        description=(
            "Replay recorded agent runs (OpenAI chat-completions JSON/JSONL, .gz too; a folder "
            "means every run in it) call by call through ARS, the recorded replies standing in "
            "for the model. With no RUN: the sample runs shipped with ars, summarized by the "
            f"built-in extractive summarizer, at a demo threshold of {DEMO_THRESHOLD}K."
        ),
    )
    rp.add_argument("runs", nargs="*", metavar="RUN", help="recorded run files or folders")
    _add_config_options(rp)
    rp.add_argument(
        "--estimator",
        default=None,
        metavar="NAME",
        help="the token estimator ARS decides with: approx, tiktoken/o200k, cl100k, a plugin's "
        "(default: the library's default); the report counts with tiktoken o200k when it is "
        "installed, whatever decides",
    )
    rp.add_argument(
        "--summarizer",
        default="extractive",
        metavar="NAME",
        help="extractive (built in, no model; default), a plugin's summarizer, or a LangChain "
        "chat-model string 'provider:model' (needs the langchain extra and the provider's "
        "API key; see 'ars plugins')",
    )
    rp.add_argument(
        "--out",
        default="ars-out",
        metavar="DIR",
        help="where ARS writes its files, one folder per run (default %(default)s)",
    )
    rp.add_argument(
        "--plot",
        metavar="FILE.png",
        default=None,
        help="draw the tokens of every request before and after ARS, with the threshold and the "
        "L2 trigger (needs matplotlib: ars[cli])",
    )
    rp.add_argument("--json", action="store_true", help="print the report as JSON")
    rp.add_argument(
        "--allow-summary-errors",
        action="store_true",
        help="exit 0 even when summary calls failed (their summaries hold the error text)",
    )
    rp.add_argument(
        "-v", "--verbose", action="store_true", help="print the engine's warnings as they happen"
    )


def _add_config_options(rp: argparse.ArgumentParser) -> None:
    defaults = SummaryConfig()
    rp.add_argument(
        "--threshold",
        type=float,
        metavar="K",
        default=None,
        help=f"summary_threshold in K tokens (x1024); default {DEFAULT_THRESHOLD_K}, "
        f"{DEMO_THRESHOLD} for the shipped samples",
    )
    rp.add_argument(
        "--keep",
        type=int,
        metavar="N",
        default=defaults.summary_keep_messages,
        help="summary_keep_messages: recent messages kept after L2 (default %(default)s)",
    )
    rp.add_argument(
        "--tool-limit",
        type=int,
        metavar="T",
        default=defaults.summary_tool_result_token_limit,
        help="summary_tool_result_token_limit: tool results above T tokens go to files "
        "(default %(default)s)",
    )
    rp.add_argument(
        "--ratio",
        type=float,
        metavar="R",
        default=defaults.summary_l2_trigger_ratio,
        help="summary_l2_trigger_ratio: L2 runs above threshold*R after L1 (default %(default)s)",
    )


def _add_estimate(sub: argparse._SubParsersAction[_Parser]) -> None:
    ep = sub.add_parser(
        "estimate",
        help="count tokens of transcripts with every estimator",
        description="Token counts of chat transcripts per estimator (approx, tiktoken o200k "
        "and cl100k), with their disagreement relative to o200k. With no FILE: the sample runs "
        "shipped with ars.",
    )
    ep.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="transcript files or folders (default: the shipped samples)",
    )
    ep.add_argument("--json", action="store_true", help="print the counts as JSON")
