"""Old path of :mod:`bench.results.metrics` (before bench/ was split into layers), kept so
that rankers written against it still import; it warns and hands over the new module."""

import sys
import warnings

from bench.results import metrics as _moved

warnings.warn(
    "bench.metrics moved to bench.results.metrics; the old path will be removed",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
