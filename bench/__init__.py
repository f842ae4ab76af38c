"""crossjem-bench: a reproducible benchmark harness for short-text re-rankers.

Data flows dataset adapter (:mod:`bench.data`) -> candidate lists -> ranker (:mod:`rankers`) ->
scores -> metrics (:mod:`bench.results.metrics`) and latency (:mod:`bench.core.timing`) -> result
record (:mod:`bench.results.records`) -> tables (:mod:`bench.reporting.tables`) and checks
(:mod:`bench.reporting.checks`). `bench latency` times every ranker on the same BM25 top-N lists
(:mod:`bench.latency`).
"""

__version__ = "0.1.0"

#: The layer rule, declared once (enforced by tests/test_layers.py, run by ``make layers``).
#: The *foundation* packages: ``core`` (settings, devices, progress, provenance, atomic writes,
#: process groups, timing), ``data`` (the data model and adapters) and ``results`` (rankings,
#: metrics, significance, records, the cache). ``rankers`` may import them and nothing else of
#: ``bench``; they import neither ``rankers`` nor any other ``bench`` package, so a ranker never
#: depends on the harness that runs it, and the harness can change without touching rankers. The
#: packages above (execution, latency, experiments, reporting, cli: the order of
#: tests/test_layers.py's ``LAYERS``) may import both. An entry names one module or package;
#: ``pkg.*`` adds all of a package's modules.
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

#: Old module paths of the foundation (before bench/ was split into layers) -> where each lives
#: now. Each old path is a small module that warns (DeprecationWarning) and hands over the new
#: module itself, so rankers written against the old layout keep working; code in this
#: repository imports only the new paths (tests/test_layers.py).
MOVED: dict[str, str] = {
    "bench.cache": "bench.results.cache",
    "bench.device": "bench.core.device",
    "bench.io": "bench.core.io",
    "bench.metrics": "bench.results.metrics",
    "bench.progress": "bench.core.progress",
    "bench.provenance": "bench.core.provenance",
    "bench.ranking": "bench.results.ranking",
    "bench.settings": "bench.core.settings",
    "bench.shard": "bench.core.shard",
    "bench.trained": "bench.core.trained",
}
