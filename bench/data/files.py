"""Reading dataset files: one error type, line-numbered lines, checksums.

Every adapter reads bytes once, hashes them (so a result records exactly which data it ran on) and
parses them line by line, so that any problem can be reported as ``file:line``.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path

#: how to install the optional download clients (Hugging Face datasets, ir_datasets)
DOWNLOAD_EXTRA = "pip install 'crossjem-bench[download]'"


class DatasetError(ValueError):
    """Bad or missing dataset input; the message names the file and line (or value) and the fix."""


def read_bytes(path: Path) -> bytes:
    """The file's bytes; an OS error (permissions, a folder in its place) is a DatasetError
    naming the file, so one unreadable file is reported like any other bad input."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read it ({exc.strerror or exc})") from exc


def read_text(path: Path) -> str:
    """The file's text, read as UTF-8. Undecodable bytes are a DatasetError naming the file and
    line (a bare decode error names neither), and an OS error one naming the file, so a settings,
    card or expected-values file is reported like any other bad input."""
    data = read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, data[: exc.start].count(b"\n") + 1, exc) from exc


def _not_utf8(path: Path, lineno: int, exc: UnicodeDecodeError) -> DatasetError:
    return DatasetError(f"{path}:{lineno}: not valid UTF-8 ({exc.reason}); save the file as UTF-8")


def sha256_16(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def files_checksum(blobs: Mapping[str, bytes]) -> str:
    """One checksum over several files: SHA-256 (16 hex) of ``name<TAB>sha256`` lines, in order."""
    manifest = "".join(f"{name}\t{hashlib.sha256(b).hexdigest()}\n" for name, b in blobs.items())
    return sha256_16(manifest.encode("utf-8"))


def iter_lines(path: Path, data: bytes) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) for each non-blank line of ``data`` (gunzipped for ``.gz``)."""
    if path.name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise DatasetError(f"{path}: not a valid gzip file ({exc}); re-create it") from exc
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as exc:
            raise _not_utf8(path, lineno, exc) from exc
        if line.strip():
            yield lineno, line
