"""Provenance recorded with every result: code version, package versions, machine."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
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


#: environment variables that change timings or numerics
ENV_KEYS = ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES")


def collect() -> dict[str, Any]:
    return {
        "env": {k: os.environ.get(k) for k in ENV_KEYS},
        "git": git_state(),
        "packages": package_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
