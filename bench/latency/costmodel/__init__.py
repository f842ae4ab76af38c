"""The latency cost model: what `bench latency` predicts beside what it measures.

* :mod:`bench.latency.costmodel.flops` - the paper's prediction: tokens, union compression and
  FLOPs of monoBERT against CROSS-JEM, pure arithmetic over token counts.
* :mod:`bench.latency.costmodel.kernels` - one calibration record of a machine's kernel rates,
  its key, cache file and checks, and the table of runtimes it is measured for
  (:data:`~bench.latency.costmodel.kernels.BACKENDS`: PyTorch on a CPU and on a CUDA GPU, ONNX
  Runtime).
* :mod:`bench.latency.costmodel.probes` - how each runtime's kernels are timed (torch ops on the
  CPU or the GPU, an encoder call's fixed cost on a GPU, tiny ONNX graphs), what a calibration
  measures, and what each layer's MatMuls run in.
* :mod:`bench.latency.costmodel.time` - one time model for every runtime: an encoder call's time
  predicted from a calibration over the runtime's layer plans (plus, on a GPU, the call's fixed
  cost), the cost fields of a row, and the calibrations of a run.

No imports here (a run's cache key covers only the code it imports).
"""
