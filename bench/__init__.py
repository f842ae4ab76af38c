"""crossjem-bench: a reproducible benchmark harness for short-text re-rankers.

Data flows dataset adapter (:mod:`bench.data`) -> candidate lists -> ranker (:mod:`rankers`) ->
scores -> metrics (:mod:`bench.metrics`) and latency (:mod:`bench.latency`) -> result record
(:mod:`bench.results`) -> tables (:mod:`bench.tables`) and checks (:mod:`bench.checks`).
"""

__version__ = "0.1.0"
