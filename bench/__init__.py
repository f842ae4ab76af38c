"""crossjem-bench: a reproducible benchmark harness for short-text re-rankers.

Data flows dataset adapter (:mod:`bench.data`) -> candidate lists -> ranker (:mod:`rankers`) ->
scores -> metrics (:mod:`bench.results.metrics`) and latency (:mod:`bench.core.timing`) -> result
record (:mod:`bench.results.records`) -> tables (:mod:`bench.reporting.tables`) and checks
(:mod:`bench.reporting.checks`). `bench latency` times every ranker on the same BM25 top-N lists
(:mod:`bench.latency`).
"""

__version__ = "0.3.0"

# Nothing else here: every cache key hashes this file (the package of every module a job runs), so
# the layer rule lives with its test (tests/test_layers.py).
