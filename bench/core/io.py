"""Files that are written whole or not at all, and storage errors that name the path.

The lowest layer's I/O: atomic writes (temporary file, fsync, rename), the checks that a results
or models folder is writable before expensive work, and JSON that has no inf/NaN. Every layer
above (datasets, records, caches, models) writes through these, so a full disk or a read-only
folder is always one :class:`StorageError` naming the path.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class StorageError(RuntimeError):
    """The results or models folder cannot be written; the message names the path and why."""


# -- storage errors ------------------------------------------------------------------------------
def describe_os_error(exc: OSError, path: Path | str) -> str:
    """``cannot write PATH: No space left on device``: the path that failed and the reason."""
    where = exc.filename if exc.filename else path
    return f"cannot write {where}: {exc.strerror or exc}"


def error_text(exc: BaseException) -> str:
    """One line: an OS error as ``PATH: reason``, anything else as its message."""
    if isinstance(exc, OSError) and exc.strerror and exc.filename:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc)


@contextlib.contextmanager
def storage_errors(path: Path | str) -> Iterator[None]:
    """Turn an OS error raised inside into a :class:`StorageError` naming ``path``."""
    try:
        yield
    except StorageError:
        raise
    except OSError as exc:
        raise StorageError(describe_os_error(exc, path)) from exc


#: what ensure_writable suggests for the results and models folders
RESULTS_HINT = "choose another with --results-dir or $BENCH_RESULTS_DIR"


def ensure_writable(folder: Path, what: str = "results", hint: str = RESULTS_HINT) -> None:
    """Create ``folder`` and write a probe file in it, before any expensive work.

    Permissions, a read-only mount or a parent that is a file then fail at once with the path
    and ``hint`` (what to do instead), instead of after an hour of training."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise StorageError(
            f"the {what} folder {folder} is not writable: {describe_os_error(exc, folder)} ({hint})"
        ) from exc


def writable_problem(folder: Path, what: str = "results", hint: str = RESULTS_HINT) -> str | None:
    """Why :func:`ensure_writable` would fail on ``folder``, found without writing anything:
    the folder, or the closest existing folder above it, must be a writable directory."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    reason = None
    if not probe.is_dir():
        reason = f"{probe} is not a folder"
    elif not os.access(probe, os.W_OK | os.X_OK):
        reason = f"{probe} is not writable"
    if reason is None:
        return None
    return f"the {what} folder {folder} is not writable: {reason} ({hint})"


def check_file_writable(path: Path, hint: str) -> int | None:
    """The mode of ``path`` (None: it does not exist yet), or a :class:`StorageError` naming it
    when it is read-only. The mode bits count even for root, whom the kernel lets write
    anything: a file made read-only is meant to stay as it is, and an atomic rename would
    replace it regardless."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(describe_os_error(exc, path)) from exc
    if not mode & 0o222 or not os.access(path, os.W_OK):
        raise StorageError(f"{path} is read-only (mode {mode:04o}): {hint}")
    return mode


def current_umask() -> int:
    """The process umask, read without changing it where /proc allows (threads share it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# -- atomic writes -------------------------------------------------------------------------------
def atomic_write_text(path: Path, text: str, mode: int | None = None) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over ``path``.

    The file gets ``mode``, else the mode a plain ``open()`` would give (0666 less the umask),
    not mkstemp's 0600. The rename replaces ``path`` whatever its own mode, so a caller that
    must respect a file's permissions checks them first (:func:`check_file_writable`). An OS
    error (full disk, read-only folder) is a :class:`StorageError` naming ``path``.
    """
    with storage_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            os.fchmod(fd, 0o666 & ~current_umask() if mode is None else mode)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def json_safe(value: object) -> object:
    """inf/NaN (e.g. candidates/s of a zero-time run) as null: JSON has no such numbers."""
    return None if isinstance(value, float) and not math.isfinite(value) else value
