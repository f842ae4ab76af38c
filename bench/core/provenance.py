"""Provenance recorded with every result: code version, package versions, machine.

:func:`code_fingerprint` is what the caches key on for "the code" of one job: the source files
the job imports (the static import closure of its modules within ``bench`` and ``rankers``,
:class:`CodeScope`), its ranker's settings file and the versions of the packages that compute
scores or train weights. A git commit would miss uncommitted edits (and an install outside git),
so the sources themselves are hashed; hashing only what the job imports keeps an edit to the CLI
or a plot from recomputing every cached result.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.core.settings import PROJECT_ROOT

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
#: an import statement whose line carries this comment runs only while a model trains (DPR's
#: BM25 negative miner): a training key follows it, a scoring key does not
TRAINING_ONLY = "# key: training"


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


def read_source(path: Path) -> bytes:
    """The bytes of one source file (the one place keys read code, so tests can edit it)."""
    return path.read_bytes()


@dataclasses.dataclass(frozen=True)
class CodeScope:
    """The code one job runs, for its cache key: the import closure of ``roots`` (modules) within
    :data:`CODE_PACKAGES`, computed from the source with :mod:`ast`, plus ``files`` (a ranker's
    settings file). ``leave_out``: modules neither hashed nor followed (a scoring key leaves out
    the measures, which are computed again from the stored run file); ``training``: follow
    imports marked :data:`TRAINING_ONLY`. A root outside the code packages (a ranker kept
    elsewhere) is hashed itself; its imports are followed into the code packages."""

    roots: tuple[str, ...]
    files: tuple[Path, ...] = ()
    leave_out: tuple[str, ...] = ()
    training: bool = False


def module_path(name: str) -> tuple[Path, str] | None:
    """(file, label) of module ``name``: ``bench/results/metrics.py`` for a code package's module,
    the module's own file for a root kept elsewhere; None when there is no source file."""
    top, *rest = name.split(".")
    if top in CODE_PACKAGES:
        base = package_folder(top).joinpath(*rest)
        for path in (base / "__init__.py", base.with_suffix(".py")):
            if path.is_file():
                folder = package_folder(top)
                return path, f"{top}/{path.relative_to(folder).as_posix()}"
        return None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin), f"{name}.py"


@functools.lru_cache(maxsize=4096)
def imports_of(name: str, is_package: bool, source: bytes, training: bool) -> tuple[str, ...]:
    """The modules of :data:`CODE_PACKAGES` that module ``name`` (source ``source``) imports,
    wherever the statement stands (lazy imports inside functions run too); imports under ``if
    TYPE_CHECKING:`` never run and are left out, as are :data:`TRAINING_ONLY` ones unless
    ``training``. ``from a import b`` counts ``a.b`` when that is a module."""
    tree = ast.parse(source)
    lines = source.decode("utf-8", "replace").splitlines()
    package = name if is_package else name.rpartition(".")[0]
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found: list[str] = []
    for node in ast.walk(tree):
        if id(node) in skipped or not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if not training and TRAINING_ONLY in lines[node.lineno - 1]:
            continue
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*parts, base] if base else parts)
        found.append(base)
        found.extend(f"{base}.{alias.name}" for alias in node.names)
    out: list[str] = []
    for module in found:
        parts = module.split(".")
        if parts[0] in CODE_PACKAGES:
            # importing a.b.c runs a/__init__ and a/b/__init__ first
            out.extend(".".join(parts[: i + 1]) for i in range(len(parts)))
    return tuple(dict.fromkeys(out))


def import_closure(scope: CodeScope) -> dict[str, Path]:
    """label -> file of every module ``scope``'s roots import, transitively (:class:`CodeScope`);
    a root's parent packages count, as importing it runs their ``__init__``."""
    seen: dict[str, Path] = {}
    todo = [".".join(r.split(".")[: i + 1]) for r in scope.roots for i in range(r.count(".") + 1)]
    done: set[str] = set()
    while todo:
        name = todo.pop()
        if name in done or any(name == m or name.startswith(m + ".") for m in scope.leave_out):
            continue
        done.add(name)
        found = module_path(name)
        if found is None:
            continue
        path, label = found
        seen[label] = path
        todo.extend(imports_of(name, path.name == "__init__.py", read_source(path), scope.training))
    return seen


@functools.cache
def key_versions() -> dict[str, str | None]:
    """Versions of :data:`KEY_PACKAGES` (None: not installed), read once per process."""
    versions: dict[str, str | None] = {}
    for name in KEY_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def code_fingerprint(scope: CodeScope) -> dict[str, Any]:
    """``{"sources": digest, "files": {label: sha}, "versions": {package: version}}`` of the code
    a job runs (:class:`CodeScope`): a result or model made by other code (an edited ranker, its
    settings file, another torch) must not be reused, while an edit elsewhere (the CLI, plots,
    another ranker) keeps it. ``files`` lets a miss name the files that changed."""
    files: dict[str, str | None] = {}
    for label, path in sorted(import_closure(scope).items()):
        files[label] = hashlib.sha256(read_source(path)).hexdigest()[:16]
    for path in scope.files:
        label = "/".join(path.parts[-3:])
        files[label] = (
            hashlib.sha256(read_source(path)).hexdigest()[:16] if path.is_file() else None
        )
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]
    return {"sources": digest, "files": files, "versions": dict(key_versions())}


def code_changes(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str:
    """What differs between two :func:`code_fingerprint` values, in words: the source files
    changed, added or dropped, and package versions."""
    if not old:
        return "the entry records no code fingerprint"
    parts = []
    if old.get("sources") != new.get("sources"):
        old_files, new_files = old.get("files"), new.get("files")
        if isinstance(old_files, dict) and isinstance(new_files, dict):
            for label in sorted({*old_files, *new_files}):
                if label not in old_files:
                    parts.append(f"{label} added")
                elif label not in new_files:
                    parts.append(f"{label} no longer used")
                elif old_files[label] != new_files[label]:
                    parts.append(f"{label} changed")
        else:
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
        "packages": package_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
