"""crossjem-bench: a reproducible benchmark harness for short-text re-rankers.

Data flows dataset adapter (:mod:`bench.data`) -> candidate lists -> ranker (:mod:`rankers`) ->
scores -> metrics (:mod:`bench.metrics`) and latency (:mod:`bench.latency.tracker`) -> result
record (:mod:`bench.results`) -> tables (:mod:`bench.tables`) and checks (:mod:`bench.checks`).
`bench latency` times every ranker on the same BM25 top-N lists (:mod:`bench.latency`).
"""

__version__ = "0.1.0"

#: The layer rule, declared once (enforced by tests/test_layers.py, run by ``make layers``).
#: ``bench`` is two layers in one package. These modules are the *foundation*: the data model,
#: metrics, device, progress, atomic writes and caching helpers, settings, and the sharding of
#: scoring over a launch's processes (training scores teachers and dev in shards). ``rankers`` may
#: import them and nothing else of ``bench``; they import neither ``rankers`` nor any other
#: ``bench`` module, so a ranker never depends on the harness that runs it, and the harness can
#: change without touching rankers. Every other ``bench`` module is the *application* layer (runner,
#: tables, CLI, latency, checks, plot...), which may import both. An entry names one module or
#: package; ``pkg.*`` adds all of a package's modules: ``bench.data`` counts whole, since importing
#: ``bench.data.model`` runs the package's ``__init__``, which imports the adapters.
FOUNDATION: frozenset[str] = frozenset(
    {
        "bench",
        "bench.data",
        "bench.data.*",
        "bench.cache",
        "bench.device",
        "bench.io",
        "bench.metrics",
        "bench.progress",
        "bench.ranking",
        "bench.provenance",
        "bench.results",
        "bench.settings",
        "bench.shard",
        "bench.trained",
    }
)
