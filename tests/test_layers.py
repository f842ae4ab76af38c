"""The layer rules of bench/ and rankers/, declared here and checked on the source (``ast``,
nothing imported).

``rankers`` may import only the foundation of ``bench`` (:data:`FOUNDATION`); the foundation
imports neither ``rankers`` nor the application modules of ``bench``; ``rankers`` modules import
each other without cycles; no module imports another module's private (``_name``) names. Every
import counts, also those inside functions and under ``TYPE_CHECKING``: a lazy import is still a
dependency, only a later one. ``make layers`` runs this file (and ``make lint`` runs that).
"""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bench", "rankers")

#: The *foundation* packages of bench: ``core`` (settings, devices, progress, provenance, atomic
#: writes, process groups, timing), ``data`` (the data model and adapters) and ``results``
#: (rankings, metrics, significance, records, the cache). ``rankers`` may import them and nothing
#: else of ``bench``; they import neither ``rankers`` nor any other ``bench`` package, so a ranker
#: never depends on the harness that runs it, and the harness can change without touching
#: rankers. The packages above (execution, latency, experiments, reporting, cli: the order of
#: :data:`LAYERS`) may import both. An entry names one module or package; ``pkg.*`` adds all of a
#: package's modules. Declared here, beside the test that enforces it: ``bench/__init__.py`` is
#: hashed by every cache key and holds nothing but the version.
FOUNDATION: frozenset[str] = frozenset(
    {
        "bench",
        "bench.core",
        "bench.core.*",
        "bench.data",
        "bench.data.*",
        "bench.results",
        "bench.results.*",
    }
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


#: module name -> source file, for every module of the project's packages
MODULES: dict[str, Path] = {
    _module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))
}


def is_foundation(module: str) -> bool:
    """Whether ``module`` is in :data:`FOUNDATION` (``pkg.*`` entries cover submodules)."""
    return module in FOUNDATION or any(
        entry.endswith(".*") and module.startswith(entry[:-1]) for entry in FOUNDATION
    )


def _is_package(module: str) -> bool:
    return MODULES.get(module, Path()).name == "__init__.py"


def _dynamic_import(node: ast.AST) -> str | None:
    """The module a call ``__import__("m")``, ``importlib.import_module("m")`` or
    ``import_module("m")`` names with a string literal (None: not such a call). An import by call
    is as much a dependency as an import statement, so the layer rules read these too."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func, first = node.func, node.args[0]
    name = getattr(func, "id", None) or getattr(func, "attr", None)  # f(...) or mod.f(...)
    if name not in ("__import__", "import_module"):
        return None
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def source_imports(source: str, module: str) -> Iterator[tuple[int, str, list[str]]]:
    """:func:`imports` of ``source`` read as the module named ``module``."""
    tree = ast.parse(source)
    package = module if _is_package(module) else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if (dynamic := _dynamic_import(node)) is not None:
            yield node.lineno, dynamic, []
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [a.name for a in node.names]
            subs = [f"{base}.{n}" for n in names if f"{base}.{n}" in MODULES]
            if subs:
                yield from ((node.lineno, sub, []) for sub in subs)
            rest = [n for n in names if f"{base}.{n}" not in MODULES]
            if rest or not subs:
                yield node.lineno, base, rest


def imports(module: str) -> Iterator[tuple[int, str, list[str]]]:
    """``(line, imported module, names)`` for every import of ``module`` in our packages, by
    statement or by a call with a literal name (:func:`_dynamic_import`); ``from pkg import sub``
    resolves to module ``pkg.sub`` when that is a module."""
    yield from source_imports(MODULES[module].read_text(encoding="utf-8"), module)


def _ours(module: str) -> bool:
    return module.split(".")[0] in PACKAGES


def _in(package: str, module: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_foundation_entries_name_existing_modules() -> None:
    for entry in FOUNDATION:
        assert entry.removesuffix(".*") in MODULES, f"FOUNDATION names no module {entry!r}"


def test_rankers_import_only_the_foundation_of_bench() -> None:
    leaks = [
        f"{MODULES[m].relative_to(ROOT)}:{line} imports {target}"
        for m in MODULES
        if _in("rankers", m)
        for line, target, _ in imports(m)
        if _in("bench", target) and not is_foundation(target)
    ]
    assert not leaks, "rankers may import only the FOUNDATION of bench:\n" + "\n".join(leaks)


def test_foundation_imports_neither_rankers_nor_the_application() -> None:
    leaks = [
        f"{MODULES[m].relative_to(ROOT)}:{line} imports {target}"
        for m in MODULES
        if is_foundation(m)
        for line, target, _ in imports(m)
        if _in("rankers", target) or (_in("bench", target) and not is_foundation(target))
    ]
    assert not leaks, "a FOUNDATION module reaches above it:\n" + "\n".join(leaks)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (as a path that ends where it starts), else None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_rankers_modules_import_each_other_without_cycles() -> None:
    graph = {
        m: {t for _, t, _ in imports(m) if _in("rankers", t) and t != m}
        for m in MODULES
        if _in("rankers", m)
    }
    cycle = _cycle(graph)
    assert cycle is None, "import cycle among rankers modules: " + " -> ".join(cycle or [])


def _type_checking_lines(module: str) -> set[int]:
    """Lines under ``if TYPE_CHECKING:`` (annotations only: never executed)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    return {
        sub.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for sub in ast.walk(node)
        if hasattr(sub, "lineno")
    }


def test_no_import_cycles_in_bench_and_rankers() -> None:
    """Every executed import counts, also one inside a function (a lazy import that closes a
    circle still ties the two modules together); only ``TYPE_CHECKING`` imports are left out."""
    graph: dict[str, set[str]] = {}
    for m in MODULES:
        skip = _type_checking_lines(m)
        graph[m] = {t for line, t, _ in imports(m) if line not in skip and t in MODULES and t != m}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _defined(package: str, kind: type, name: str) -> list[str]:
    """Modules of ``package`` that define ``name`` (a class or function of ``kind``)."""
    return [
        m
        for m in MODULES
        if _in(package, m)
        for node in ast.walk(ast.parse(MODULES[m].read_text(encoding="utf-8")))
        if isinstance(node, kind) and getattr(node, "name", None) == name
    ]


def test_the_latency_room_is_cut_by_stage() -> None:
    """bench/latency: at most 13 modules (its packages' included), no import circle even through
    ``TYPE_CHECKING`` (the plan's types live in the plan), one calibration record and one time
    model for every runtime, and no ranker family named: it asks rankers through their hooks."""
    latency = [m for m in MODULES if _in("bench.latency", m)]
    assert len(latency) <= 13, f"{len(latency)} modules in bench/latency: {sorted(latency)}"
    graph = {m: {t for _, t, _ in imports(m) if t in latency and t != m} for m in latency}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle in bench/latency: " + " -> ".join(cycle or [])
    assert _defined("bench.latency", ast.ClassDef, "Calibration") == [
        "bench.latency.costmodel.kernels"
    ]
    assert _defined("bench.latency", ast.FunctionDef, "call_time") == [
        "bench.latency.costmodel.time"
    ]
    families = [
        f"{MODULES[m].relative_to(ROOT)}:{line} imports {target}"
        for m in latency
        for line, target, _ in imports(m)
        if _in("rankers.families", target)
    ]
    assert not families, "bench/latency names a ranker family:\n" + "\n".join(families)


#: The layers of the data flow, lowest first: a module imports only modules of its own layer or
#: of layers listed before it, never one after it; ``latency`` and ``experiments`` are siblings
#: (neither imports the other). Patterns as :func:`fnmatch.fnmatch` reads them; the first layer
#: with an exact name wins, else the first with a matching pattern. Every module must have one.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("bench", "bench.core", "bench.core.*")),
    ("data", ("bench.data", "bench.data.*")),
    ("results", ("bench.results", "bench.results.*")),
    # rankers/: the one error every ranker and part raises; the parts, what every family needs
    # and nothing of a family (compute/: losses, precision, runtimes; io/: weights in and out;
    # inputs/: what enters an encoder); the contract a ranker is written against, the modules at
    # the top of rankers/ (the registry, Ranker and its options, the option declarations families
    # share, the hook groups); training (only a trained model's key covers it); the families
    ("rankers.errors", ("rankers.errors",)),
    (
        "rankers.parts",
        (
            "rankers.compute",
            "rankers.compute.*",
            "rankers.compute.precision",
            "rankers.compute.runtimes",
            "rankers.io",
            "rankers.io.*",
            "rankers.inputs",
            "rankers.inputs.*",
        ),
    ),
    (
        "rankers.contract",
        ("rankers", "rankers.base", "rankers.hooks", "rankers.trainconfig", "rankers.itemorder"),
    ),
    ("rankers.fit", ("rankers.fit", "rankers.fit.*")),
    ("rankers.families", ("rankers.families", "rankers.families.*")),
    ("execution", ("bench.execution", "bench.execution.*")),
    ("latency", ("bench.latency", "bench.latency.*")),
    ("experiments", ("bench.experiments", "bench.experiments.*")),
    ("reporting", ("bench.reporting", "bench.reporting.*")),
    ("cli", ("bench.cli", "bench.cli.*")),
)
#: layers at the same height: neither may import the other
SIBLINGS = frozenset({"latency", "experiments"})


def layer_of(module: str) -> int | None:
    """Index in :data:`LAYERS` of ``module``'s layer (None: in none)."""
    for i, (_, patterns) in enumerate(LAYERS):
        if module in patterns:
            return i
    for i, (_, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatch(module, p) for p in patterns):
            return i
    return None


def test_every_module_has_a_layer() -> None:
    missing = [m for m in MODULES if layer_of(m) is None]
    assert not missing, "modules in no layer of LAYERS: " + ", ".join(missing)


def test_no_module_imports_a_higher_layer_or_a_sibling() -> None:
    """Imports inside functions count (a lazy import is a later dependency, still one); only
    ``TYPE_CHECKING`` imports are left out."""
    leaks = []
    for m in MODULES:
        mine, skip = layer_of(m), _type_checking_lines(m)
        for line, target, _ in imports(m):
            theirs = layer_of(target) if target in MODULES else None
            if line in skip or theirs is None or mine is None or theirs == mine:
                continue
            sibling = {LAYERS[mine][0], LAYERS[theirs][0]} <= SIBLINGS
            if theirs > mine or sibling:
                leaks.append(
                    f"{MODULES[m].relative_to(ROOT)}:{line} ({LAYERS[mine][0]}) imports "
                    f"{target} ({LAYERS[theirs][0]})"
                )
    assert not leaks, "imports up the layers or between siblings:\n" + "\n".join(leaks)


def test_cycle_finder_finds_cycles() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_imports_private_names_of_another(package: str) -> None:
    leaks = [
        f"{MODULES[m].relative_to(ROOT)}:{line} imports {', '.join(private)} from {target}"
        for m in MODULES
        if _in(package, m)
        for line, target, names in imports(m)
        if _ours(target) and (private := [n for n in names if n.startswith("_")])
    ]
    assert not leaks, "private names used across modules:\n" + "\n".join(leaks)


def test_packages_hold_no_imports() -> None:
    """Importing ``bench.core.timing`` runs ``bench/__init__.py`` and ``bench/core/__init__.py``
    too, and cache keys hash a job's import closure: an import (or re-export) in a package's
    ``__init__`` would widen every key below it, so they hold docstrings and constants only.
    ``rankers`` itself is the registry (families imported by name, when first created)."""
    found = [
        f"{m} line {line}: {target}"
        for m, path in MODULES.items()
        if path.name == "__init__.py" and m != "rankers"
        for line, target, _ in imports(m)
        if target != "__future__"
    ]
    assert not found, "imports in package __init__ files: " + "; ".join(found)


#: the module paths removed in 0.3.0 (each had warned since bench/ and rankers/ were split into
#: layers) -> where the module lives now: no code here imports them, none exists again
REMOVED: dict[str, str] = {
    "bench.cache": "bench.results.cache",
    "bench.device": "bench.core.device",
    "bench.io": "bench.core.io",
    "bench.metrics": "bench.results.metrics",
    "bench.progress": "bench.core.progress",
    "bench.provenance": "bench.core.provenance",
    "bench.ranking": "bench.results.ranking",
    "bench.settings": "bench.core.settings",
    "bench.shard": "bench.core.shard",
    "bench.significance": "bench.results.significance",
    "bench.trained": "bench.core.trained",
    "bench.latency.tracker": "bench.core.timing",
    "bench.core.moved": "(the table of old paths; gone with them)",
    "rankers.training": "rankers.fit.loop",
    "rankers.listtrain": "rankers.fit.lists",
    "rankers.resume": "rankers.fit.resume",
    "rankers.persist": "rankers.io.persist",
    "rankers.models": "rankers.io.models",
}


def test_the_repository_imports_no_removed_path() -> None:
    found = [
        f"{MODULES[m].relative_to(ROOT)}:{line} imports {target} (now {REMOVED[target]})"
        for m in MODULES
        for line, target, _ in imports(m)
        if target in REMOVED
    ]
    assert not found, "removed module paths used:\n" + "\n".join(found)


@pytest.mark.parametrize("old", sorted(REMOVED))
def test_a_removed_path_is_gone(old: str) -> None:
    """Importing a removed path fails (no shim hands over the new module any more)."""
    import importlib
    import sys

    sys.modules.pop(old, None)
    assert old not in MODULES
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_the_old_cli_path_is_gone() -> None:
    """``from bench.cli import app`` (the single-module CLI before 0.2.0) fails; the app is
    ``bench.cli.main.app``."""
    with pytest.raises(ImportError):
        from bench.cli import app  # noqa: F401


def test_an_import_by_call_with_a_literal_name_counts() -> None:
    """``__import__("m")`` and ``importlib.import_module("m")`` are imports as much as
    ``import m``: the layer rules see them (a name computed at run time cannot be read)."""
    source = (
        "import importlib\n"
        "from importlib import import_module\n"
        "def late(name):\n"
        "    __import__('bench.cli.main')\n"
        "    importlib.import_module('bench.execution.runner')\n"
        "    import_module('rankers.families.monobert')\n"
        "    importlib.import_module(name)\n"
        "    print('bench.reporting')\n"
    )
    found = [(line, target) for line, target, _ in source_imports(source, "bench.core.io")]
    assert found == [
        (1, "importlib"),
        (2, "importlib"),
        (4, "bench.cli.main"),
        (5, "bench.execution.runner"),
        (6, "rankers.families.monobert"),
    ]


#: the modules at the top of each package (the rest lives in packages by layer or role):
#: ``bench`` holds only its version; ``rankers`` the contract a ranker is written against
TOP_MODULES: dict[str, frozenset[str]] = {
    "bench": frozenset({"__init__.py"}),
    "rankers": frozenset(
        {
            "__init__.py",
            "base.py",
            "errors.py",
            "hooks.py",
            "itemorder.py",
            "trainconfig.py",
        }
    ),
}


@pytest.mark.parametrize("package", PACKAGES)
def test_top_level_holds_packages_and_the_contract_only(package: str) -> None:
    """``ls bench/ rankers/`` shows packages and :data:`TOP_MODULES` only: a module added at the
    top (a shim, a helper) goes into the package of its layer."""
    top = {p.name for p in (ROOT / package).glob("*.py")}
    assert top == TOP_MODULES[package]


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("rankers.fit.loop", "from rankers.families.monobert import MonoBERTRanker\n"),
        ("rankers.base", "def f():\n    from rankers.fit.lists import fit_lists\n"),
        ("rankers.inputs.batching", "from rankers.base import Ranker\n"),
        ("rankers.hooks", "from rankers.fit.loop import Trainable\n"),
        ("rankers.io.persist", "import rankers.families.encoder\n"),
        ("rankers.io.persist", "from rankers.hooks import view_as\n"),
        ("rankers.compute.losses", "from rankers.base import RankerConfig\n"),
        ("rankers.inputs.tokens", "from rankers.errors import RankerError\nimport rankers.hooks\n"),
        ("bench.results.records", "from rankers.base import Ranker\n"),
    ],
)
def test_an_injected_upward_import_is_caught(module: str, source: str) -> None:
    """The layer rule fails on one import up (read as the module would hold it)."""
    mine = layer_of(module)
    ups = [t for _, t, _ in source_imports(source, module) if (layer_of(t) or 0) > (mine or 0)]
    assert ups, f"{source!r} in {module} was not seen as an import up"


#: the most lines a function's body may take (its signature aside, so a Typer command's option
#: declarations do not count): past that it does several things, which get names of their own
LONGEST_BODY = 100


def long_functions(source: str, label: str) -> list[str]:
    """``label:line name (N lines)`` for each function of ``source`` whose body (docstring
    included, signature aside) is longer than :data:`LONGEST_BODY` lines."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.body[0].lineno + 1
            if lines > LONGEST_BODY:
                out.append(f"{label}:{node.lineno} {node.name} ({lines} lines)")
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_no_function_is_over_100_lines(package: str) -> None:
    """A function of ``bench`` or ``rankers`` reads as one step: one that grows past
    :data:`LONGEST_BODY` lines is split into steps named for what they decide."""
    long = [
        found
        for path in sorted((ROOT / package).rglob("*.py"))
        for found in long_functions(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert long == []


def test_a_long_body_is_caught_and_a_long_signature_is_not() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(LONGEST_BODY))
    options = "".join(f"    o{i}: int = {i},\n" for i in range(2 * LONGEST_BODY))
    assert long_functions(f"def f(\n{options}) -> None:\n{body}", "m.py") == []
    assert long_functions(f"def f() -> None:\n{body}    return None\n", "m.py") == [
        f"m.py:1 f ({LONGEST_BODY + 1} lines)"
    ]
