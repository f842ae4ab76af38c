"""Latency: tracking timed calls, and the `bench latency` benchmark built on it.

* :mod:`bench.core.timing` - warm-up, CUDA synchronisation and events, percentiles,
  throughput (:class:`LatencyTracker`, :func:`summarise`); `bench run` times with it too.
* :mod:`bench.latency.lists` - the lists every ranker is timed on (BM25 top N over the split's
  collection) and their token statistics for the cost model.
* :mod:`bench.latency.protocol` - what is timed (each ranker's latency variants) and how
  (interleaved calls, each split into host step and model step).
* :mod:`bench.latency.processes` - throughput mode: the calls sharded over several processes.
* :mod:`bench.latency.benchmark` - the benchmark itself (:func:`run_benchmark`): lists, cost
  model, timing in one or several processes, the record.
* :mod:`bench.latency.records` - rows, per-N blocks, speed-ups, record files, ``bench check``.
* :mod:`bench.latency.tables` - the paper's latency table and where the time goes.

No imports here: importing :mod:`bench.core.timing` (as `bench run` does) runs no benchmark,
table or runner code, and a run's cache key covers only the code it imports
(:mod:`bench.execution.keys`).
"""
