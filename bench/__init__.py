"""crossjem-bench: a reproducible benchmark harness for short-text re-rankers.

Data flows dataset adapter (:mod:`bench.data`) -> candidate lists -> ranker (:mod:`rankers`) ->
scores -> metrics (:mod:`bench.metrics`) and latency (:mod:`bench.latency.tracker`) -> result
record (:mod:`bench.results`) -> tables (:mod:`bench.tables`) and checks (:mod:`bench.checks`).
`bench latency` times every ranker on the same BM25 top-N lists (:mod:`bench.latency`).
"""

__version__ = "0.1.0"
