"""How a ranker's numbers are computed, apart from any family: the ranking losses it trains on
(``losses.py``), the dtype it scores and trains in (``precision.py``) and the runtime that runs
its encoder (``runtimes.py``: ONNX Runtime, OpenVINO).

No imports here: cache keys hash the import closure of the code a job runs."""
