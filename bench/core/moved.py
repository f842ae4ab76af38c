"""Old module paths and where each lives now: one table for ``bench`` and ``rankers``.

**Which old paths get a shim.** A path that code kept outside this repository is documented to
import: every module now in the foundation, at its path from before bench/ was split into layers
where that path is free (a ranker may import :mod:`bench.core`, :mod:`bench.data` and
:mod:`bench.results`; ``bench.results``, the old records module, is now that package, and the
old ``bench.data`` loader functions moved into :mod:`bench.data.splits`) and the rankers
modules docs/extending.md names for rankers defined elsewhere (the training loop, list training,
resume, persistence, model aliases). A ranker family's module gets none: rankers are reached by
their registered name (``rankers.create_ranker("monobert")``), never by module path.

Each old path is a module of two lines that calls :func:`hand_over`: importing it warns
(DeprecationWarning, naming the new path and :data:`REMOVED_IN`) and hands over the new module
itself, so private names and monkeypatching act on the one module. Code in this repository
imports only the new paths (tests/test_layers.py). The table lives here, not in
``bench/__init__.py``, because only the old-path modules import it: adding or removing a shim
changes no job's cache key.
"""

from __future__ import annotations

import importlib
import sys
import warnings

#: the release that removes every old path of :data:`MOVED` (docs/design.md says the same)
REMOVED_IN = "0.3.0"

#: old module path -> the module it moved to
MOVED: dict[str, str] = {
    # bench/ split into layers (0.1.0)
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
    # rankers/ split into machinery packages and families (0.2.0)
    "rankers.training": "rankers.fit.loop",
    "rankers.listtrain": "rankers.fit.lists",
    "rankers.resume": "rankers.fit.resume",
    "rankers.persist": "rankers.io.persist",
    "rankers.models": "rankers.io.models",
}


def moved_message(old: str) -> str:
    """What importing old path ``old`` warns."""
    return f"{old} moved to {MOVED[old]}; the old path will be removed in {REMOVED_IN}"


def hand_over(old: str) -> None:
    """Make module ``old`` the module it moved to (the same object, private names and
    monkeypatching included), warning the importer once with the new path and the release that
    removes the old one."""
    warnings.warn(moved_message(old), DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(MOVED[old])
