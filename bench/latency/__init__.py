"""`bench latency`, by stage: what is timed, how, the orchestration, the cost model.

* :mod:`bench.latency.plan` - what is timed: the options
  (:class:`~bench.latency.plan.BenchOptions`), ``--arch`` encoder sizes, the precisions of
  ``--dtypes`` and which ranker runs which, and the entries (:class:`~bench.latency.plan.Entry`,
  one per ranker configuration).
* :mod:`bench.latency.lists` - the lists every ranker is timed on (BM25 top N over the split's
  collection) and their token statistics for the cost model.
* :mod:`bench.latency.protocol` - how it is timed: warm-up, calls interleaved across rankers,
  each call whole and split into host step and model step, the rows, the encoder work of each.
* :mod:`bench.latency.processes` - throughput mode: the calls sharded over several processes.
* :mod:`bench.latency.benchmark` - the orchestration
  (:func:`~bench.latency.benchmark.run_benchmark`): lists, timing in one or several processes,
  the cost model, speed-ups and per-precision gains, the record.
* :mod:`bench.latency.records` - rows, per-N blocks, speed-ups, record files, ``bench check``.
* :mod:`bench.latency.costmodel` - what is predicted: the paper's FLOPs
  (:mod:`~bench.latency.costmodel.flops`), the machine's kernel rates per runtime
  (:mod:`~bench.latency.costmodel.kernels`, measured by :mod:`~bench.latency.costmodel.probes`)
  and the encoder time from them (:mod:`~bench.latency.costmodel.time`).
* :mod:`bench.latency.storecost` - memory and build time of the token stores (a script).

The timing primitives live in :mod:`bench.core.timing` (`bench run` times with them too); the
tables render in :mod:`bench.reporting.latency_tables`.

No imports here: importing :mod:`bench.core.timing` (as `bench run` does) runs no benchmark,
table or runner code, and a run's cache key covers only the code it imports
(:mod:`bench.execution.keys`).
"""
