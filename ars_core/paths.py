"""Virtual paths and the text ARS stores under them.

The rules every :class:`~ars_core.files.FileBackend` applies: how a virtual path is
checked (:func:`check_path`), how tool and thread names become file and folder
names (:func:`sanitize_name`, :func:`scope_name`), how text becomes bytes and
hashes (:func:`encode_text`, :func:`text_sha256`), and where ARS keeps its files
when no place is named (:func:`default_files_place`).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
from collections.abc import Sequence
from pathlib import Path

from .errors import PathBoundaryError

__all__ = [
    "DEFAULT_FILES_DIR",
    "DEFAULT_READ_ONLY",
    "FILES_DIR_ENV",
    "check_path",
    "decode_text",
    "default_files_place",
    "encode_text",
    "is_temporary",
    "sanitize_name",
    "scope_name",
    "text_sha256",
]

#: how text becomes bytes in every ARS file and hash (see the module doc)
TEXT_ENCODING = "utf-8"
TEXT_ERRORS = "surrogatepass"
#: what the temporary name of an atomic write holds (``.<name>.ars-tmp-<random>``)
TMP_MARK = ".ars-tmp-"


#: the environment variable naming where ARS keeps its files when no backend is given
FILES_DIR_ENV = "ARS_FILES_DIR"
#: where ARS keeps its files when no backend is given and ``ARS_FILES_DIR`` is unset
DEFAULT_FILES_DIR = ".ars"


def default_files_place() -> tuple[str, str]:
    """Where ARS keeps its files when no place is named: ``(url, why)``.

    ``ARS_FILES_DIR`` names a local folder or any backend URL; unset, the folder
    ``.ars`` in the current directory. A relative folder is made absolute now, so a
    later ``chdir`` does not move the files. ``why`` is said in the one INFO line
    that names the place with its first write.
    """
    configured = os.environ.get(FILES_DIR_ENV, "").strip()
    if "://" in configured:
        return configured, f"from {FILES_DIR_ENV}"
    if configured:
        return Path(os.path.abspath(os.path.expanduser(configured))).as_uri(), (
            f"from {FILES_DIR_ENV}"
        )
    why = f"the default; set {FILES_DIR_ENV} or pass a backend to choose another place"
    return Path(os.path.abspath(DEFAULT_FILES_DIR)).as_uri(), why


#: virtual areas no ARS write may touch (the public Skills area)
DEFAULT_READ_ONLY: tuple[str, ...] = ("skills",)

_DRIVE = re.compile(r"^[A-Za-z]:")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def encode_text(text: str) -> bytes:
    """The bytes ARS stores for ``text``: UTF-8, lone surrogates passed through."""
    return text.encode(TEXT_ENCODING, TEXT_ERRORS)


def decode_text(data: bytes) -> str:
    """The exact inverse of :func:`encode_text`."""
    return data.decode(TEXT_ENCODING, TEXT_ERRORS)


def text_sha256(text: str) -> str:
    """The hex SHA-256 of ``text`` as ARS stores it (any ``str`` can be hashed).

    Encoded and hashed a piece at a time (the same digest: UTF-8 encodes each code
    point alone), so a large text costs no full-size copy and a worker thread
    hashing it never holds the interpreter for long."""
    digest = hashlib.sha256()
    for start in range(0, len(text), HASH_PIECE):
        digest.update(encode_text(text[start : start + HASH_PIECE]))
    return digest.hexdigest()


#: characters encoded and hashed at a time by :func:`text_sha256`
HASH_PIECE = 1 << 20


def sanitize_name(name: str, *, default: str = "tool", max_length: int = 64) -> str:
    """Make a tool name safe to use inside a file name.

    Anything but letters, digits, ``_``, ``.`` and ``-`` becomes ``_``; leading
    dots are dropped so ``..`` can never survive.
    """
    cleaned = _UNSAFE.sub("_", name or "").strip("._-")
    cleaned = cleaned.replace("..", "_")
    return cleaned[:max_length] or default


def is_temporary(path: str) -> bool:
    """Whether ``path`` names the temporary file of an atomic write
    (``.<name>.ars-tmp-<random>``)."""
    name = posixpath.basename(path.rstrip("/"))
    return name.startswith(".") and TMP_MARK in name


def scope_name(scope: str) -> str:
    """A file-system-safe, collision-free directory name for a scope (thread id).

    Safe names are kept as they are; any other becomes ``_<sanitized>-<hash of
    the raw name>``. A safe name never starts with ``_`` (:func:`sanitize_name`
    strips it), so a hashed name can never equal one: ``"a/b"`` and ``"a_b"``,
    ``"../etc"`` and ``"etc"``, ``"team/alice"`` and the literal
    ``"team_alice-8b8fafbf563a"`` never share a scope.
    """
    safe = sanitize_name(scope, default="default", max_length=96)
    if safe != scope:
        digest = text_sha256(scope)[:12]
        safe = f"_{safe}-{digest}"
    return safe


def check_path(
    path: str, *, write: bool = False, read_only: Sequence[str] = DEFAULT_READ_ONLY
) -> str:
    """Validate a virtual path and return it normalised.

    Raises :class:`~ars_core.errors.PathBoundaryError` for an empty path, a NUL
    byte, a backslash, an absolute path or drive, a ``~`` home path, any ``..``
    segment, and (when ``write``) a path inside a ``read_only`` area.
    """
    if not isinstance(path, str) or not path.strip():
        raise PathBoundaryError(str(path), "empty path")
    if "\x00" in path:
        raise PathBoundaryError(path, "NUL byte in path")
    if "\\" in path:
        raise PathBoundaryError(path, "backslash in path")
    if path.startswith("/") or _DRIVE.match(path):
        raise PathBoundaryError(path, "absolute paths are not allowed")
    if path.startswith("~"):
        raise PathBoundaryError(path, "home-relative paths are not allowed")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise PathBoundaryError(path, "'..' segments are not allowed")
    if not parts:
        raise PathBoundaryError(path, "empty path")
    norm = "/".join(parts)
    if write:
        for area in read_only:
            area = area.strip("/")
            if norm == area or norm.startswith(area + "/"):
                raise PathBoundaryError(path, f"the {area!r} area is read-only")
    return norm
