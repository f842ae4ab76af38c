"""What the result and model caches promise: keys that name everything a result depends on,
entries that prove they are whole before they are reused, and one writer per key.

* **Keys.** A :class:`CacheKey` is a hash over named components: ``config`` (ranker settings and
  run options), ``data`` (file checksums, relevance level, the dataset card's facts), ``model`` /
  ``teacher`` (the trained model's own key) and ``code``
  (:func:`bench.core.provenance.code_fingerprint`: the sources the job imports, its ranker's
  settings file and the scoring packages' versions; :mod:`bench.execution.keys` says which modules
  each job runs). The components are stored with the entry, so a miss next to an entry of the same
  config can say what changed (:func:`explain_miss`).
* **Verification.** A result record lists its files with their SHA-256; a trained-model folder
  carries a :data:`MANIFEST` of every file's SHA-256, written at save time. Reuse checks them; a
  damaged entry is moved aside (:func:`move_aside`, ``<entry>.damaged-<time>``) with a warning
  and recomputed. A resumable training state is checked before it is resumed.
* **Locking.** :func:`entry_lock` holds ``<entry>.lock`` (``flock``) while an entry is checked,
  computed and written, so a second identical run waits for the first and then reuses its result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import fcntl
import json
import logging
import os
import socket
import sys
import zipfile
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from bench.core import provenance
from bench.core.io import atomic_write_json, storage_errors
from bench.results.records import DAMAGED_MARK, RECORD, config_hash, file_sha256, files_problem

log = logging.getLogger(__name__)

#: checksums of every file of a trained-model folder, written last at save time
MANIFEST = "manifest.json"
LOCK_SUFFIX = ".lock"
#: how each key component is named when a miss is explained
PART_NAMES = {
    "code": "code",
    "data": "data or dataset card",
    "model": "trained model",
    "teacher": "teacher",
}


def component_hash(name: str, value: Any) -> str:
    """The hash of one key component, as :meth:`CacheKey.of` stores it; readers that ask
    whether a record is current (:mod:`bench.execution.selection`) recompute components with it."""
    return config_hash({name: value})


@dataclasses.dataclass(frozen=True)
class CacheKey:
    """Named components (each a 12-hex hash) and the key they make together."""

    parts: dict[str, str]

    @classmethod
    def of(cls, **components: Any) -> CacheKey:
        """Hash each component's canonical JSON; ``config`` must be one of them."""
        if "config" not in components:
            raise ValueError("a cache key needs a 'config' component")
        return cls({name: component_hash(name, value) for name, value in components.items()})

    @property
    def digest(self) -> str:
        return config_hash(self.parts)


def explain_miss(
    key: CacheKey,
    entry: Path,
    meta_file: str,
    code_of: Callable[[Mapping[str, Any]], Any],
    code: Mapping[str, Any] | None = None,
) -> str | None:
    """Why ``entry`` is computed although a sibling entry has the same config, or None.

    Siblings are the folders beside ``entry`` holding ``meta_file`` (a JSON object with
    ``key_parts``); ``code_of`` finds the code fingerprint in it. The newest such sibling is
    compared component by component: e.g. ``code changed since DIR (torch 2.1 -> 2.2)``;
    ``code`` is the job's code fingerprint now, which names the files that changed.
    """
    if not entry.parent.is_dir():
        return None
    found: list[tuple[float, Path, dict[str, Any]]] = []
    for sibling in entry.parent.iterdir():
        meta = sibling / meta_file
        if sibling == entry or DAMAGED_MARK in sibling.name or not meta.is_file():
            continue
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        parts = data.get("key_parts") if isinstance(data, dict) else None
        if isinstance(parts, dict) and parts.get("config") == key.parts["config"]:
            found.append((meta.stat().st_mtime, sibling, data))
    if not found:
        return None
    _, sibling, data = max(found, key=lambda item: item[0])
    parts = data["key_parts"]
    changed = [n for n in key.parts if n != "config" and parts.get(n) != key.parts[n]]
    if not changed:
        return None
    text = " and ".join(PART_NAMES.get(n, n) for n in changed) + f" changed since {sibling}"
    if "code" in changed:
        text += f" ({provenance.code_changes(code_of(data), code or {})})"
    return text


#: what a results root holds, wherever it is: run records and trained-model folders (the runner's
#: runs/DATASET/RANKER/ENTRY and models/DATASET/RANKER/KEY, the latency models/random/NAME)
RESULTS_ENTRIES = (f"runs/*/*/*/{RECORD}", f"models/*/*/*/{MANIFEST}", f"models/*/*/{MANIFEST}")


def holds_results(folder: Path) -> bool:
    """Whether ``folder`` is a results root (any, not only the configured one): it keeps a run
    record under runs/ or a trained model under models/. Commands that replace folders refuse
    these, since a results root holds work of hours that no command can write back."""
    if not folder.is_dir():
        return False
    return any(next(iter(folder.glob(pattern)), None) is not None for pattern in RESULTS_ENTRIES)


# -- damaged entries -----------------------------------------------------------------------------
def move_aside(path: Path, problem: str, stem: Path | None = None) -> Path:
    """Rename a damaged ``path`` to ``<stem>.damaged-<time>`` (``stem`` defaults to ``path``) and
    warn, naming the problem; the files stay for inspection, the cache no longer sees them."""
    stamp = _dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    base = stem if stem is not None else path
    target = base.with_name(f"{base.name}{DAMAGED_MARK}{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = base.with_name(f"{base.name}{DAMAGED_MARK}{stamp}-{n}")
    with storage_errors(target):
        path.rename(target)
    log.warning("%s is damaged: %s. Moved it to %s; recomputing.", path, problem, target)
    return target


def write_manifest(folder: Path, only: Collection[str] | None = None) -> None:
    """Checksum every file of ``folder`` into ``folder/manifest.json`` (written last); with
    ``only``, the files under those top-level names (a ranker's save beside a resumable state)."""
    files = {
        f.relative_to(folder).as_posix(): file_sha256(f)
        for f in sorted(folder.rglob("*"))
        if f.is_file()
        and f.name != MANIFEST
        and (only is None or f.relative_to(folder).parts[0] in only)
    }
    atomic_write_json(folder / MANIFEST, {"files": files})


def manifest_problem(folder: Path) -> str | None:
    """What is wrong with a saved folder by its manifest (None: every file is whole)."""
    path = folder / MANIFEST
    if not path.is_file():
        return f"{path} is missing (an unfinished save, or a folder from an older version)"
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["files"]
        if not isinstance(files, dict):
            raise ValueError("'files' is not a mapping")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{path} is unreadable ({exc})"
    return files_problem(folder, files)


def safetensors_problem(folder: Path) -> str | None:
    """The first ``*.safetensors`` file under ``folder`` whose header does not cover the file
    (truncated or overwritten); cheap: only headers are read."""
    from safetensors import SafetensorError, safe_open

    for path in sorted(folder.rglob("*.safetensors")):
        try:
            with safe_open(str(path), framework="numpy"):
                pass
        except (SafetensorError, OSError) as exc:
            return f"{path} is not a readable safetensors file ({exc})"
    return None


def state_problem(folder: Path) -> str | None:
    """What is wrong with a resumable training state folder (``accelerate save_state``): its
    safetensors headers, and the zip archives ``torch.save`` writes (``*.bin``, ``*.pkl``,
    ``*.pt``), CRC-checked member by member."""
    problem = safetensors_problem(folder)
    if problem:
        return problem
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.suffix not in (".bin", ".pkl", ".pt"):
            continue
        try:
            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip()
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            return f"{path} is not a readable torch.save archive ({exc})"
        if bad is not None:
            return f"{path}: member {bad} fails its CRC check"
    return None


# -- locking -------------------------------------------------------------------------------------
def lock_path(entry: Path) -> Path:
    return entry.with_name(entry.name + LOCK_SUFFIX)


def _holder() -> str:
    since = _dt.datetime.now().isoformat(timespec="seconds")
    command = " ".join(Path(sys.argv[0]).name if i == 0 else a for i, a in enumerate(sys.argv))
    return json.dumps(
        {"pid": os.getpid(), "host": socket.gethostname(), "since": since, "command": command}
    )


def describe_holder(text: str) -> str:
    """``pid 123 on host since TIME (bench run ...)`` from a lock file's content."""
    try:
        info = json.loads(text)
        return f"pid {info['pid']} on {info['host']} since {info['since']} ({info['command']})"
    except (ValueError, KeyError, TypeError):
        return "another process"


@contextlib.contextmanager
def entry_lock(entry: Path, what: str) -> Iterator[None]:
    """Hold the lock of the cache entry ``entry`` (``<entry>.lock``, beside it).

    A second process asking for the same entry logs that the same work is running (with the
    holder's pid and command) and waits; afterwards it finds the entry written and reuses it.
    The lock file stays (removing it would race with a waiting process); the lock itself is
    released by the kernel when the holder exits, even on a crash.
    """
    path = lock_path(entry)
    with storage_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    held = False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = describe_holder(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
            log.warning(
                "%s: the same work is already running (%s); waiting for it to finish, "
                "then reusing its result",
                what,
                holder,
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
            log.info("%s: the other run has finished", what)
        held = True
        with storage_errors(path):  # a full disk: the error names the lock file
            os.ftruncate(fd, 0)
            os.pwrite(fd, _holder().encode("utf-8"), 0)
        yield
    finally:
        if held:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
