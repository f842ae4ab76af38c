"""The latency cost model: what `bench latency` predicts beside what it measures.

* :mod:`bench.latency.costmodel.flops` - the paper's prediction: tokens, union compression and
  FLOPs of monoBERT against CROSS-JEM, pure arithmetic over token counts.
* :mod:`bench.latency.costmodel.kernels` - one calibration record of a machine's kernel rates,
  its key, cache file and checks, and the table of runtimes it is measured for
  (:data:`~bench.latency.costmodel.kernels.BACKENDS`: PyTorch, ONNX Runtime).
* :mod:`bench.latency.costmodel.probes` - how each runtime's kernels are timed (torch ops, tiny
  ONNX graphs), what a calibration measures.
* :mod:`bench.latency.costmodel.time` - one time model for every runtime: an encoder call's time
  predicted from a calibration over the runtime's layer plans, and the cost fields of a row.

No imports here (a run's cache key covers only the code it imports).
"""
