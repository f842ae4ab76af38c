"""Provenance recorded with every result: code version, package versions, machine.

:func:`code_fingerprint` is what the caches key on for "the code": the sources of the installed
``bench`` and ``rankers`` packages and the versions of the packages that compute scores or train
weights. A git commit would miss uncommitted edits (and an install outside git), so the sources
themselves are hashed.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.settings import PROJECT_ROOT

PACKAGES = (
    "crossjem-bench",
    "torch",
    "transformers",
    "sentence-transformers",
    "rank-bm25",
    "ir-measures",
    "numpy",
    "colbert-ai",
    "accelerate",
)


def git_state() -> dict[str, Any]:
    """Commit of the checkout and whether it had uncommitted changes (None outside git)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


#: packages whose sources are "the code" of a cache key
CODE_PACKAGES = ("bench", "rankers")
#: packages whose version can change a score or a trained weight (absent ones are recorded as None)
KEY_PACKAGES = (
    "torch",
    "transformers",
    "sentence-transformers",
    "rank-bm25",
    "ir-measures",
    "colbert-ai",
)
#: source files of a code package: Python modules and settings files (rankers/configs/*.yaml)
SOURCE_PATTERNS = ("*.py", "*.yaml")


def source_files(folder: Path) -> list[Path]:
    """The package's source files under ``folder``, sorted; caches and hidden files left out."""
    return sorted(
        f
        for pattern in SOURCE_PATTERNS
        for f in folder.rglob(pattern)
        if f.is_file()
        and not any(p.startswith(".") or p == "__pycache__" for p in f.relative_to(folder).parts)
    )


def sources_digest(folders: Mapping[str, Path]) -> str:
    """SHA-256 (16 hex) over the relative path and content of every source file of ``folders``."""
    digest = hashlib.sha256()
    for name, folder in sorted(folders.items()):
        for f in source_files(folder):
            digest.update(f"{name}/{f.relative_to(folder).as_posix()}\0".encode())
            digest.update(hashlib.sha256(f.read_bytes()).digest())
    return digest.hexdigest()[:16]


def package_folder(name: str) -> Path:
    """The folder an imported package was loaded from (the installed code, not a guess)."""
    module = importlib.import_module(name)
    return Path(str(module.__file__)).resolve().parent


@functools.cache
def code_fingerprint() -> dict[str, Any]:
    """``{"sources": digest, "versions": {package: version}}``, computed once per process.

    A cached result or trained model made by other code (an edited ranker, another torch) must
    not be reused, so every cache key holds this.
    """
    versions: dict[str, str | None] = {}
    for name in KEY_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    folders = {name: package_folder(name) for name in CODE_PACKAGES}
    return {"sources": sources_digest(folders), "versions": versions}


def code_changes(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str:
    """What differs between two :func:`code_fingerprint` values, in words."""
    if not old:
        return "the entry records no code fingerprint"
    parts = []
    if old.get("sources") != new.get("sources"):
        parts.append("bench/rankers sources changed")
    old_versions, new_versions = old.get("versions") or {}, new.get("versions") or {}
    for name in sorted({*old_versions, *new_versions}):
        if old_versions.get(name) != new_versions.get(name):
            parts.append(f"{name} {old_versions.get(name)} -> {new_versions.get(name)}")
    return ", ".join(parts) or "same code"


#: environment variables that change timings or numerics
ENV_KEYS = ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES")


def collect() -> dict[str, Any]:
    return {
        "env": {k: os.environ.get(k) for k in ENV_KEYS},
        "git": git_state(),
        "code": code_fingerprint(),
        "packages": package_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
